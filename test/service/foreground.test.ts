import { BurstYield, Foreground } from '../../foreground';
import { spin } from '../helpers/event-loop';

/** foreground.ts: background work waits while a burst of API requests saturates the event loop, and only then. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

test('BurstYield waits while a burst is under way, for at most its budget, and the next burst only once the work caught up', async () => {
  const BUDGET = 600;
  const foreground = new Foreground();
  const yielding = new BurstYield(foreground, BUDGET);
  // Nothing held back waits about 0 ms; a check well under the budget leaves room for a busy machine.
  const notHeld = (ms: number) => expect(ms).toBeLessThan(BUDGET / 2);
  let started = performance.now();
  await yielding.turn();
  notHeld(performance.now() - started);

  let end = foreground.begin();
  spin(150);
  expect(foreground.busy()).toBe(true);
  started = performance.now();
  // Two callers wait out the budget together; the wait ends with it, the burst still under way.
  await Promise.all([yielding.turn(), yielding.turn()]);
  expect(performance.now() - started).toBeGreaterThanOrEqual(BUDGET - 10);
  expect(foreground.busy()).toBe(true);
  // Spent: the rest of this burst holds nothing back.
  started = performance.now();
  await yielding.turn();
  notHeld(performance.now() - started);

  // Another burst before the work caught up with what was held back: no budget.
  end();
  await sleep(80);
  end = foreground.begin();
  spin(150);
  started = performance.now();
  await yielding.turn();
  notHeld(performance.now() - started);
  end();

  // Caught up, the next burst has a budget of its own (judged saturated on its own time, not
  // averaged with the idle moment before it); an abort ends the wait.
  yielding.drained();
  await sleep(1000);
  end = foreground.begin();
  spin(150);
  started = performance.now();
  const aborted = new AbortController();
  setTimeout(() => aborted.abort(), 100);
  await yielding.turn(aborted.signal);
  const waited = performance.now() - started;
  expect(waited).toBeGreaterThanOrEqual(90);
  notHeld(waited);
  end();
});

test('a burst of several requests at once is judged within its first 100 ms; a lone request only after a full window', async () => {
  const lone = new Foreground();
  const endLone = lone.begin();
  spin(40);
  expect(lone.busy()).toBe(false);
  spin(80);
  expect(lone.busy()).toBe(true);
  endLone();

  const burst = new Foreground();
  const ends = [burst.begin(), burst.begin()];
  spin(40);
  expect(burst.busy()).toBe(true);
  for (const end of ends) end();
});
