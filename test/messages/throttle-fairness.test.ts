import { randomUUID } from 'node:crypto';
import { newId } from '../../db/ids';
import { reserveSendSlots, setThrottleRate, takeSendSlot } from '../../db/messages/send-throttle';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { generateDkimKeyPair } from '../../mail/dkim';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney, track } from '../helpers/journeys';
import { waitUntil } from '../helpers/sending';
import { runCli } from '../helpers/service-process';
import { type SmtpMessage, type SmtpSink, startSmtpSink } from '../helpers/smtp';

/**
 * The per-project throttle holds for every email the delivery engine sends, and one project's
 * backlog does not hold back another project's email: the engine claims every email from the
 * table, each project with queued mail getting a turn in every claim.
 */

const RATE = 10;
/** How far ahead of a throttled project's clock a claim takes its emails (db/messages/delivery-queue.ts). */
const AHEAD_SECONDS = 0.1;

let env: TestEnv;
let smtp: SmtpSink;
let throttled: Sender;
let busy: Sender;
let quiet: Sender;

interface Sender {
  project: ProjectWithKeys;
  from: string;
}

beforeAll(async () => {
  smtp = await startSmtpSink();
  env = await startTestEnv({ SMTP_URL: smtp.url, SEND_RETRY_MAX_INTERVAL_SECONDS: '1', JOURNEY_TIME_SCALE: '0.001' });
  const keys = await generateDkimKeyPair();
  const sender = async (name: string): Promise<Sender> => {
    const project = await env.project(name);
    const domain = `${project.id.slice(-12)}.fairness.test`;
    // Written verified: no DNS, and no verification workflow to wait for before the worker starts.
    await query(
      env.orm.em.fork(),
      `insert into domains (id, project_id, domain, status, dkim_selector, dkim_private_key, dkim_public_key, verified_at)
       values (?, ?, ?, 'verified', ?, ?, ?, now())`,
      [newId('dom'), project.id, domain, keys.selector, keys.privateKeyPem, keys.publicKeyBase64],
    );
    return { project, from: `hello@${domain}` };
  };
  [throttled, busy, quiet] = [await sender('throttled'), await sender('busy'), await sender('quiet')];
  await setThrottleRate(env.orm.em.fork(), throttled.project.id, RATE);
  await env.startWorker();
}, 60_000);

afterAll(async () => {
  await env?.close();
  await smtp?.close();
});

const em = () => env.orm.em.fork();
/** The sink's messages from the sender's address (its From header; the envelope sender may be a bounce address). */
const fromProject = (s: Sender) => (m: SmtpMessage) => m.raw.toString('utf8').includes(s.from);

test("a throttled project's transactional and journey emails reach the relay no faster than its rate", async () => {
  const tpl = await env
    .http()
    .post('/templates')
    .set(bearer(throttled.project.secretKey))
    .send({ name: 'nudge', subject: 'Nudge', body: '<p>Hi {{email}}</p>', from: throttled.from });
  expect(tpl.status).toBe(201);
  await buildJourney(env, throttled.project, {
    eventName: 'joined',
    steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } }],
    transitions: [['trigger', 'mail']],
  });
  const arrived = () => smtp.messages.filter(fromProject(throttled));
  const before = arrived().length;

  const requestedAt = Date.now();
  const to = Array.from({ length: 12 }, (_, i) => `t${i}@example.org`);
  const sent = await env.http().post('/v1/send').set(bearer(throttled.project.secretKey)).send({ to, from: throttled.from, subject: 'S', body: 'B' });
  expect(sent.status).toBe(200);
  for (let i = 0; i < 6; i++) await track(env, throttled.project, `j${i}@example.org`, 'joined');
  const total = to.length + 6;
  const mine = await waitUntil(async () => arrived().length >= before + total && arrived().slice(before), 60_000);

  // The clock hands out one slot per 1/RATE s, each claimable AHEAD_SECONDS early: the j-th email
  // (0-based) cannot reach the relay before j / RATE - AHEAD_SECONDS after the first request.
  const times = mine.map((m) => m.receivedAt.getTime()).sort((a, b) => a - b);
  const early = times
    .map((t, j) => ({ j, afterMs: t - requestedAt, earliestMs: Math.floor((j / RATE - AHEAD_SECONDS) * 1000) - 5 }))
    .filter((x) => x.afterMs < x.earliestMs);
  expect(early).toEqual([]);
  // Every one of them went through the clock: it stands at least `total` slots after the first.
  const clock = await queryOne<{ ahead_ms: number }>(
    em(),
    `select extract(epoch from next_at) * 1000 - ? as ahead_ms from send_throttles where project_id = ?`,
    [requestedAt, throttled.project.id],
  );
  expect(Number(clock!.ahead_ms)).toBeGreaterThanOrEqual((total / RATE - AHEAD_SECONDS) * 1000 - 5);
}, 90_000);

test("one project's backlog does not hold back another project's email, whichever way /v1/send wrote it", async () => {
  const BACKLOG = 2000;
  // A relay that takes its time: the backlog lasts seconds, long enough to tell the orders apart.
  smtp.acceptDelayMs = 20;
  try {
    await query(
      em(),
      `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, queue, created_at)
       select gen_random_uuid(), ?, 'transactional', 'backlog-' || i || '@example.org', ?, 'Backlog', 'B', 'QUEUED', ?,
              now() - make_interval(secs => 60) + make_interval(secs => i / 1000.0)
       from generate_series(1, ?) i`,
      [busy.project.id, busy.from, env.taskQueue, BACKLOG],
    );
    env.deps.wakeups.emails(env.taskQueue);
    await waitUntil(async () => smtp.messages.some(fromProject(busy)), 30_000);

    const auth = bearer(quiet.project.secretKey);
    const shared = await env.http().post('/v1/send').set(auth).send({ to: 'quiet-1@example.org', from: quiet.from, subject: 'Q', body: 'Q' });
    // An email with an attachment is written in a transaction of its own.
    const attachments = [{ filename: 'a.txt', content: Buffer.from('hello').toString('base64'), contentType: 'text/plain' }];
    const inTransaction = await env.http().post('/v1/send').set(auth).send({ to: 'quiet-2@example.org', from: quiet.from, subject: 'Q', body: 'Q', attachments });
    expect([shared.status, inTransaction.status]).toEqual([200, 200]);

    for (const to of ['quiet-1@example.org', 'quiet-2@example.org']) {
      await waitUntil(async () => smtp.messages.some((m) => m.envelope.to.includes(to)), 60_000);
      const at = smtp.messages.findIndex((m) => m.envelope.to.includes(to));
      const backlogBefore = smtp.messages.slice(0, at).filter(fromProject(busy)).length;
      const stillQueued = await queryOne<{ n: number }>(
        em(),
        `select count(*)::int as n from emails where project_id = ? and status in ('QUEUED', 'SENDING')`,
        [busy.project.id],
      );
      if (process.env.TEST_VERBOSE) process.stderr.write(`[fairness] ${to}: ${backlogBefore} of the backlog before it, ${stillQueued!.n} waiting\n`);
      // Most of the backlog was still waiting when the quiet project's email reached the relay.
      expect({ to, before: backlogBefore < BACKLOG / 2, waiting: stillQueued!.n > BACKLOG / 4 }).toEqual({ to, before: true, waiting: true });
    }
  } finally {
    smtp.acceptDelayMs = 0;
  }
  await waitUntil(async () => smtp.messages.filter(fromProject(busy)).length >= BACKLOG, 120_000);
}, 180_000);

test('a retry keeps to its project’s rate: it takes a free slot, or waits for one and takes nothing', async () => {
  const project = await env.project('retries');
  // No rate of its own: a retry is not throttled, and leaves no clock behind.
  expect(await takeSendSlot(em(), project.id)).toBe(0);
  expect(await queryOne(em(), 'select 1 from send_throttles where project_id = ?', [project.id])).toBeUndefined();

  await setThrottleRate(em(), project.id, 2);
  const nextAt = async () =>
    Number((await queryOne<{ ms: number }>(em(), 'select extract(epoch from next_at) * 1000 as ms from send_throttles where project_id = ?', [project.id]))!.ms);
  // A free clock: the slot is taken and the clock moves on by 1 / rate.
  expect(await takeSendSlot(em(), project.id)).toBe(0);
  const taken = await nextAt();
  // A clock that is ahead (a campaign reserved 10 slots): the retry waits, and takes nothing meanwhile.
  await reserveSendSlots(em(), project.id, 10, 100);
  const reserved = await nextAt();
  expect(reserved - taken).toBeGreaterThanOrEqual(4_900);
  const wait = await takeSendSlot(em(), project.id);
  expect(wait).toBeGreaterThan(4_000);
  expect(await nextAt()).toBe(reserved);
  await setThrottleRate(em(), randomUUID(), 1).then(
    () => expect('no error').toBe('404 for an unknown project'),
    (err: { status?: number }) => expect(err.status).toBe(404),
  );
});

test('`tidings project throttle` sets and removes a project’s own rate; an unknown project or a bad rate changes nothing', async () => {
  const project = await env.project('cli throttle');
  const cli = (...args: string[]) => runCli(['project', 'throttle', ...args], { ...process.env, DATABASE_URL: process.env.TEST_DATABASE_URL, LOG_LEVEL: 'silent' });
  const rate = async () => (await queryOne<{ rate: number | null }>(em(), 'select rate_per_second as rate from send_throttles where project_id = ?', [project.id]))?.rate;

  const set = await cli(project.id, '7.5');
  expect([set.code, JSON.parse(set.stdout)]).toEqual([0, { id: project.id, ratePerSecond: 7.5 }]);
  expect(await rate()).toBe(7.5);
  for (const bad of [[project.id, '0'], [project.id, 'fast'], [project.id]]) {
    expect((await cli(...bad)).code).toBe(1);
  }
  const unknown = await cli('prj_unknown', '5');
  expect([unknown.code === 0, unknown.stderr]).toEqual([false, expect.stringContaining('No project with id "prj_unknown"')]);
  expect(await rate()).toBe(7.5);
  const off = await cli(project.id, 'off');
  expect([off.code, JSON.parse(off.stdout).ratePerSecond]).toEqual([0, null]);
  expect(await rate()).toBeNull();
}, 120_000);
