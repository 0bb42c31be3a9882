import { Client } from 'pg';
import { EngineWakeups, NOTIFY_SPACING_MS, OUTBOX_CHANNEL, OutboxListener } from '../../temporal/wakeups';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { ManualTimer } from '../helpers/timer';

/**
 * After a commit a writer wakes the engines (temporal/wakeups.ts) through NOTIFY, the first at once
 * and then at most one per NOTIFY_SPACING_MS, the last after the last wake-up; every worker's LISTEN
 * connection (OutboxListener) wakes its waiters. A LISTEN connection of the test counts the NOTIFYs.
 */

let env: TestEnv;
let watcher: Client;
const heard: { key: string }[] = [];

beforeAll(async () => {
  env = await startTestEnv();
  watcher = new Client({ connectionString: env.orm.config.get('clientUrl') });
  await watcher.connect();
  watcher.on('notification', (n) => n.payload && heard.push({ key: n.payload }));
  await watcher.query(`listen ${OUTBOX_CHANNEL}`);
}, 60_000);

afterAll(async () => {
  await watcher?.end();
  await env?.close();
});

const heardFor = (key: string) => heard.filter((h) => h.key === key);

/** Resolves when the test's LISTEN connection has heard `count` NOTIFYs for the key. */
async function untilHeard(key: string, count: number): Promise<void> {
  while (heardFor(key).length < count) {
    await new Promise<void>((resolve, reject) => {
      const heardOne = () => {
        clearTimeout(timeout);
        resolve();
      };
      const timeout = setTimeout(() => {
        watcher.off('notification', heardOne);
        reject(new Error(`heard ${heardFor(key).length} NOTIFYs for ${key}, expected ${count}`));
      }, 10_000);
      watcher.once('notification', heardOne);
    });
  }
}

test('a burst of wake-ups sends a NOTIFY at once, then one per spacing at most, and one after the last', async () => {
  const queue = 'wakeups-burst';
  const key = `emails:${queue}`;
  // The spacing is a rule in time: the test moves the wake-ups' timer itself.
  const timer = new ManualTimer();
  const wakeups = new EngineWakeups(env.orm, (err) => { throw err; }, timer);
  const t0 = timer.now();

  // The first goes at once, without the timer moving.
  wakeups.emails(queue);
  await untilHeard(key, 1);
  expect(timer.waiting).toBe(0);

  // One within the spacing waits for its end.
  timer.advance(5);
  wakeups.emails(queue);
  await timer.parked();
  expect(heardFor(key)).toHaveLength(1);

  // Those that come meanwhile (one per request, as under load) go with it.
  for (let i = 0; i < 10; i++) {
    timer.advance(1);
    wakeups.emails(queue);
  }
  expect(timer.waiting).toBe(1);
  expect(heardFor(key)).toHaveLength(1);

  // At the spacing's end one NOTIFY goes, after the last wake-up: an engine that looked just before it still hears of it.
  timer.advance(t0 + NOTIFY_SPACING_MS - timer.now());
  await untilHeard(key, 2);

  // The next within the spacing of that one waits again.
  timer.advance(NOTIFY_SPACING_MS / 2);
  wakeups.emails(queue);
  await timer.parked();
  expect(heardFor(key)).toHaveLength(2);
  timer.advance(NOTIFY_SPACING_MS / 2);
  await untilHeard(key, 3);

  // Long after the last, a wake-up goes at once, and it is the only one since: nothing was sent without a wake-up.
  timer.advance(NOTIFY_SPACING_MS * 100);
  wakeups.emails(queue);
  await untilHeard(key, 4);
  expect(timer.waiting).toBe(0);
  expect(heardFor(key)).toHaveLength(4);
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
