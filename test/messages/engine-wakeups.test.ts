import { Client } from 'pg';
import { EngineWakeups, NOTIFY_SPACING_MS, OUTBOX_CHANNEL, OutboxListener } from '../../temporal/wakeups';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * After a commit a writer wakes the engines (temporal/wakeups.ts) through NOTIFY, the first at once
 * and then at most one per NOTIFY_SPACING_MS, the last after the last wake-up; every worker's LISTEN
 * connection (OutboxListener) wakes its waiters. A LISTEN connection of the test counts the NOTIFYs.
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

  // 100 wake-ups over at least 200 ms: one per request, as under load. The spacing is a time
  // rule, so this test runs on the clock.
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

test('a wake-up reaches the engines waiting on its key through the LISTEN connection, and no others', async () => {
  const queue = 'wakeups-listen';
  const listener = new OutboxListener(env.orm.config.get('clientUrl')!);
  try {
    const wakeups = new EngineWakeups(env.orm, (err) => { throw err; });
    // Its LISTEN connection opened first, so that the NOTIFY below cannot come before it.
    await listener.wait('warm-up', 0, 0);
    const emails = listener.generation(`emails:${queue}`);
    const triggers = listener.generation(`triggers:${queue}`);
    const waiting = listener.wait(`emails:${queue}`, emails, 30_000);
    wakeups.emails(queue);
    await waiting;
    expect(listener.generation(`emails:${queue}`)).toBe(emails + 1);
    expect(listener.generation(`triggers:${queue}`)).toBe(triggers);
    // The trigger dispatcher's key the same way.
    const dispatcher = listener.wait(`triggers:${queue}`, triggers, 30_000);
    wakeups.triggers(queue);
    await dispatcher;
    expect(listener.generation(`triggers:${queue}`)).toBe(triggers + 1);
  } finally {
    await listener.close();
  }
});
