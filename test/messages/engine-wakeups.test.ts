import { Client } from 'pg';
import { OUTBOX_CHANNEL } from '../../db/messages/delivery-queue';
import { EngineWakeups, NOTIFY_SPACING_MS } from '../../db/messages/engine-wakeups';
import { OutboxListener } from '../../db/messages/outbox-listener';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * After a commit the API wakes the outbox engines (db/messages/engine-wakeups.ts): those of its own
 * process in memory, at once; other processes' through NOTIFY, the first at once and then at most
 * one per NOTIFY_SPACING_MS, the last after the last wake-up. A LISTEN connection counts the NOTIFYs.
 */

let env: TestEnv;
let watcher: Client;
const heard: { key: string; at: number }[] = [];

beforeAll(async () => {
  env = await startTestEnv();
  watcher = new Client({ connectionString: env.orm.config.get('clientUrl') });
  await watcher.connect();
  watcher.on('notification', (n) => n.payload && heard.push({ key: n.payload, at: Date.now() }));
  await watcher.query(`listen ${OUTBOX_CHANNEL}`);
}, 60_000);

afterAll(async () => {
  await watcher?.end();
  await env?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const heardFor = (key: string) => heard.filter((h) => h.key === key);

async function untilHeard(key: string, count: number, timeoutMs = 5000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; heardFor(key).length < count && Date.now() < deadline; ) await sleep(10);
}

test('a burst of wake-ups sends a NOTIFY at once, then one per spacing at most, and one after the last', async () => {
  const queue = 'wakeups-burst';
  const key = `emails:${queue}`;
  const wakeups = new EngineWakeups(env.orm, (err) => { throw err; });
  const started = Date.now();
  wakeups.emails(queue);
  await untilHeard(key, 1);
  expect(heardFor(key)[0]!.at - started).toBeLessThan(1000);

  // 100 wake-ups over at least 200 ms: one per request, as under load.
  const burstStart = Date.now();
  let lastWake = 0;
  for (let i = 0; i < 100; i++) {
    wakeups.emails(queue);
    lastWake = Date.now();
    await sleep(2);
  }
  await sleep(NOTIFY_SPACING_MS * 5);
  const burst = heardFor(key).slice(1);
  const spanMs = lastWake - burstStart;
  expect(burst.length).toBeGreaterThanOrEqual(1);
  // Unspaced, each wake-up that came while one was in flight sent another: dozens here.
  expect(burst.length).toBeLessThanOrEqual(Math.ceil(spanMs / NOTIFY_SPACING_MS) + 2);
  // The last one goes after the last wake-up: an engine that looked just before it still hears of it.
  expect(burst[burst.length - 1]!.at).toBeGreaterThanOrEqual(lastWake);
});

test("this process's engines are woken at once, without a round trip; others still get the NOTIFY", async () => {
  const queue = 'wakeups-local';
  const key = `emails:${queue}`;
  const listener = new OutboxListener(env.orm.config.get('clientUrl')!);
  try {
    const wakeups = new EngineWakeups(env.orm, (err) => { throw err; }, listener);
    // Its LISTEN connection opened first, so that the wait below has only the wake-up to see.
    await listener.wait('warm-up', 0, 0);
    const before = listener.generation(key);
    const waiting = listener.wait(key, before, 10_000);
    wakeups.emails(queue);
    // In memory: the generation moved before anything reached PostgreSQL.
    expect(listener.generation(key)).toBe(before + 1);
    expect(heardFor(key)).toHaveLength(0);
    // And the waiter woke before the event loop turned once more: no round trip (a clock would
    // judge this machine's load instead).
    const first = await Promise.race([waiting.then(() => 'woken'), new Promise((resolve) => setImmediate(() => resolve('a turn later')))]);
    expect(first).toBe('woken');
    await untilHeard(key, 1);
    expect(heardFor(key)).toHaveLength(1);
    // The trigger dispatcher's key is woken the same way.
    wakeups.triggers(queue);
    expect(listener.generation(`triggers:${queue}`)).toBe(1);
  } finally {
    await listener.close();
  }
});
