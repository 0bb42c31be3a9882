import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer } from '../helpers/env';
import { spin } from '../helpers/event-loop';
import { startSendingEnv, type SendingEnv, waitUntil } from '../helpers/sending';

/**
 * With the API and the worker in one process, the delivery engine lets a burst of requests that
 * saturates the event loop go first (foreground.ts BurstYield, temporal/delivery/activities.ts):
 * an email accepted during the burst waits in the hand-off, for at most DELIVERY_YIELD_SECONDS of
 * the burst, and is then sent even though the burst goes on. A later burst, once the engine caught
 * up, has a budget of its own.
 */
const DOMAIN = 'yield.test';
const YIELD_SECONDS = 1;
let s: SendingEnv;
let project: ProjectWithKeys;
const tag = Date.now();

beforeAll(async () => {
  s = await startSendingEnv({ DELIVERY_YIELD_SECONDS: String(YIELD_SECONDS) });
  project = await s.env.project('yield');
  await s.verifiedDomain(project, DOMAIN);
});

afterAll(async () => {
  await s?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const arrived = (to: string) => s.smtp.messages.some((m) => m.envelope.to.includes(to));

async function send(to: string): Promise<void> {
  const res = await s.env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `me@${DOMAIN}`, subject: 'Hi', body: '<p>Hello</p>' });
  expect(res.status).toBe(200);
}

/** A burst that saturated the loop and goes on until the returned function is called. */
function burst(): () => void {
  const foreground = s.env.deps.foreground!;
  const end = foreground.begin();
  spin(150);
  expect(foreground.busy()).toBe(true);
  return end;
}

test('an email accepted during a burst waits for it, at most the yield budget, and a later burst has a budget of its own', async () => {
  // Idle: sent at once.
  const idle = `idle-${tag}@example.org`;
  await send(idle);
  await waitUntil(async () => arrived(idle));

  for (const round of [1, 2]) {
    const end = burst();
    const to = `burst-${round}-${tag}@example.org`;
    const started = performance.now();
    await send(to);
    await sleep(500);
    expect(arrived(to)).toBe(false);
    // Held back, not starved: sent once the budget is spent, the burst still going on.
    await waitUntil(async () => arrived(to));
    expect(performance.now() - started).toBeGreaterThanOrEqual(YIELD_SECONDS * 1000 - 100);
    end();
    // The burst is over (no request for 50 ms) and its email sent: the next burst has a budget of its own.
    await sleep(100);
  }
  expect(s.smtp.messages.filter((m) => m.envelope.to.some((t) => t.endsWith(`-${tag}@example.org`)))).toHaveLength(3);
});
