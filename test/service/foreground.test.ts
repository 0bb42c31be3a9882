import { Foreground } from '../../foreground';

/** foreground.ts: background work waits while a burst of API requests saturates the event loop, and only then. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Keeps the event loop busy, as a burst of requests does. */
const spin = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
};

test('a burst that saturates the event loop is busy until it ends; a request on an idle loop is not', async () => {
  const foreground = new Foreground();
  expect(foreground.busy()).toBe(false);

  // One request in flight, the loop idle: a trickle holds nothing back.
  const trickle = foreground.begin();
  await sleep(150);
  expect(foreground.busy()).toBe(false);
  trickle();

  // Requests in flight while the loop has no time to spare.
  const end = foreground.begin();
  spin(150);
  expect(foreground.busy()).toBe(true);
  // Still the same burst after an idle moment: it stays busy.
  await sleep(120);
  expect(foreground.busy()).toBe(true);
  end();
  end(); // a second call changes nothing
  expect(foreground.busy()).toBe(true);
  // The burst ended (no request for 50 ms).
  await sleep(80);
  expect(foreground.busy()).toBe(false);
});

test('quiet() waits for the burst to end, at most maxWaitMs, and not after an abort', async () => {
  const foreground = new Foreground();
  const end = foreground.begin();
  spin(150);
  expect(foreground.busy()).toBe(true);

  let started = performance.now();
  await foreground.quiet(200);
  expect(performance.now() - started).toBeGreaterThanOrEqual(190);

  const aborted = new AbortController();
  started = performance.now();
  setTimeout(() => aborted.abort(), 50);
  await foreground.quiet(5000, aborted.signal);
  expect(performance.now() - started).toBeLessThan(1000);

  setTimeout(end, 100);
  started = performance.now();
  await foreground.quiet(5000);
  const waited = performance.now() - started;
  expect(waited).toBeGreaterThanOrEqual(140);
  expect(waited).toBeLessThan(1000);
  expect(foreground.busy()).toBe(false);
});
