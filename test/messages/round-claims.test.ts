import { randomUUID } from 'node:crypto';
import { claimDueEmails, claimStatement } from '../../db/messages/delivery-queue';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { DeliveryRound } from '../../temporal/delivery/round';
import { MarkStatements } from '../../temporal/delivery/sent-marks';
import { deliveryTuning } from '../../temporal/delivery/tuning';
import { createSmtpMailer, type Mailer } from '../../mail/transport';
import { EngineWakeups, emailsKey, OutboxListener } from '../../temporal/wakeups';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { waitUntil } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/**
 * When a delivery round claims (temporal/delivery/round.ts): a claim that found the queue drained
 * is followed by the next only after a wake-up, so under a steady stream each claim takes what
 * was committed between two wake-ups; a claim that took a full batch is followed at once. A round
 * runs here on a queue of its own (no worker runs), with the real listener, wake-ups and relay;
 * its idle wait is a minute, so nothing but a wake-up or a full batch can start a claim within a
 * test. Emails claimed by one statement share its `now()`, their last_attempt_at.
 */

let env: TestEnv;
let project: ProjectWithKeys;
let smtp: SmtpSink;
let mailer: Mailer;
let listener: OutboxListener;
let wakeups: EngineWakeups;

beforeAll(async () => {
  smtp = await startSmtpSink();
  env = await startTestEnv({ SMTP_URL: smtp.url });
  project = await env.project('round claims');
  mailer = createSmtpMailer(smtp.url);
  listener = new OutboxListener(process.env.TEST_DATABASE_URL!);
  wakeups = new EngineWakeups(env.orm, (err) => {
    throw err;
  });
}, 60_000);

afterAll(async () => {
  mailer?.close();
  await listener?.close();
  await env?.close();
  await smtp?.close();
});

/** A round of one lane (a claim takes 4) on `queue`, until the returned stop is called. */
async function startRound(queue: string): Promise<{ stop: () => Promise<void> }> {
  // Listening before the first wake-up is sent: a wait of 0 ms opens the LISTEN connection.
  await listener.wait(emailsKey(queue), listener.generation(emailsKey(queue)), 0);
  const em = env.orm.em.fork();
  const tuning = { ...deliveryTuning(env.deps.config), concurrency: 1, claimBatch: 4, idleWaitMs: 60_000 };
  const abort = new AbortController();
  const round = new DeliveryRound(
    { em, marks: new MarkStatements(em), mailer, listener, tuning, retryLeaseSeconds: 60 },
    { queue, maxSeconds: 60 },
    abort.signal,
  );
  const running = round.run();
  return {
    stop: async () => {
      abort.abort();
      await running;
    },
  };
}

async function queueEmail(queue: string): Promise<string> {
  const id = randomUUID();
  await query(
    env.orm.em.fork(),
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, queue)
     values (?, ?, 'transactional', ?, 'a@round-claims.test', 'S', 'B', 'QUEUED', ?)`,
    [id, project.id, `${id}@example.org`, queue],
  );
  return id;
}

const rowsOf = (ids: string[]) =>
  query<{ id: string; status: string; claimed_at: string | null }>(
    env.orm.em.fork(),
    `select id, status, last_attempt_at::text as claimed_at from emails where id = any(?::uuid[])`,
    [ids],
  ).then((rows) => ids.map((id) => rows.find((r) => r.id === id)!));

const allSent = (ids: string[]) => async () => (await rowsOf(ids)).every((r) => r.status === 'SENT');

test('after a claim that found the queue drained, emails written meanwhile wait for the wake-up, then go in one claim', async () => {
  const queue = `round-claims-${randomUUID().slice(0, 8)}`;
  // The relay takes 300 ms per message: the round is busy sending while more emails are written.
  smtp.acceptDelayMs = 300;
  // Written before the round starts, which claims it at once: no wake-up is on its way.
  const first = await queueEmail(queue);
  const round = await startRound(queue);
  try {
    await waitUntil(async () => (await rowsOf([first]))[0]!.status === 'SENDING', 10_000);

    // Written without a wake-up while the first is at the relay: the claim that took the first found nothing else.
    const unannounced = [await queueEmail(queue), await queueEmail(queue)];
    await waitUntil(allSent([first]), 10_000);
    const last = await queueEmail(queue);
    wakeups.emails(queue);
    await waitUntil(allSent([...unannounced, last]), 10_000);

    const rows = await rowsOf([first, ...unannounced, last]);
    // The three were claimed together, by the claim the wake-up started, after the first was sent.
    expect(new Set(rows.slice(1).map((r) => r.claimed_at)).size).toBe(1);
    expect(rows[1]!.claimed_at).not.toBe(rows[0]!.claimed_at);
  } finally {
    smtp.acceptDelayMs = 0;
    await round.stop();
  }
}, 30_000);

test('a claim that took a full batch is followed by the next without a wake-up', async () => {
  const queue = `round-claims-${randomUUID().slice(0, 8)}`;
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push(await queueEmail(queue));
  const round = await startRound(queue);
  try {
    // One wake-up for ten emails: the first claims take 4, 4 (full batches), and the third the last 2.
    wakeups.emails(queue);
    await waitUntil(allSent(ids), 10_000);
    const claims = new Set((await rowsOf(ids)).map((r) => r.claimed_at));
    expect(claims.size).toBe(3);
  } finally {
    await round.stop();
  }
}, 30_000);

test('the queued claim binds no parameter (planned once per connection), and its queue is quoted', async () => {
  expect(claimStatement('tidings', 64, 60, 'queued').params).toEqual([]);
  const queue = `it's ${randomUUID().slice(0, 8)}`;
  const [ours, other] = [await queueEmail(queue), await queueEmail(`${queue}'`)];
  const { emails } = await claimDueEmails(env.orm.em.fork(), queue, 10, 60);
  expect(emails.map((e) => e.email.id)).toEqual([ours]);
  expect((await rowsOf([ours, other])).map((r) => r.status)).toEqual(['SENDING', 'QUEUED']);
});
