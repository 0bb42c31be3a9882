import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney, type BuiltJourney, track } from '../helpers/journeys';
import { deliveriesSettled, type Domain, waitUntil } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { type Answer, postJson, splitService, type SplitService, SPLIT_RATE_LIMIT } from '../helpers/split-service';

/**
 * A 200 from /v1/send or /v1/track is a promise that survives the API process: the API (`tidings
 * start --api`, its own process) is SIGKILLed the moment each answer's status line arrives, so
 * nothing it might still do after answering gets done. Then:
 *   - every email a /v1/send answered for is delivered, once;
 *   - every journey a tracked event triggers (TRIGGER → SEND_EMAIL) starts once and sends once;
 *   - every execution waiting for the tracked event (WAIT_FOR_EVENT → SEND_EMAIL) moves on, once.
 * Twice: once with the worker (`tidings start --worker`) running throughout, once with the worker
 * down (SIGKILLed before the requests) and a new one started only after the last kill, so the work
 * must wait in PostgreSQL or Temporal rather than in any process.
 */
const DOMAIN = 'api-crash.test';
/** From the last kill: a new worker starts (it bundles the workflows), then everything is delivered. */
const SETTLE_MS = 60_000;

let dns: DnsServer;
let smtp: SmtpSink;
let env: TestEnv;
let svc: SplitService;
let project: ProjectWithKeys;
let triggerWf: BuiltJourney;
let waitWf: BuiltJourney;
const tag = Date.now();
const TRIGGER = `crash-trigger-${tag}`;
const ENTER = `crash-enter-${tag}`;
const PAID = `crash-paid-${tag}`;
const ROUNDS = ['worker-up', 'worker-down'] as const;
const sendTo = (round: string) => [0, 1, 2].map((i) => `send-${round}-${i}-${tag}@example.org`);
const triggered = (round: string) => `triggered-${round}-${tag}@example.org`;
const waiting = (round: string) => `waiting-${round}-${tag}@example.org`;

const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[api-crash] ${msg}\n`);
const db = () => env.orm.em.fork();
const auth = () => bearer(project.secretKey);

async function template(name: string, subject: string): Promise<string> {
  const res = await env
    .http()
    .post('/templates')
    .set(auth())
    .send({ name, subject, body: `<p>${name} for {{email}}</p>`, from: `hello@${DOMAIN}`, type: 'TRANSACTIONAL' });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** Executions of the workflow by contact email, oldest first. */
const executionsOf = (wf: BuiltJourney) =>
  query<{ email: string; status: string; waiting_for_event: string | null }>(
    db(),
    `select c.email, x.status, x.waiting_for_event from workflow_executions x join contacts c on c.id = x.contact_id
      where x.workflow_id = ? order by x.started_at`,
    [wf.id],
  );

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  // This API starts the domain's verification workflow, and its interval is the re-check period: a first
  // check that runs before the test publishes the records must not leave the domain pending for 5 minutes.
  env = await startTestEnv({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1', RATE_LIMIT_PER_MINUTE: SPLIT_RATE_LIMIT });
  svc = await splitService(env.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address });
  const started = Promise.all([svc.startWorker(), svc.startApi()]);
  try {
    project = await env.project('api crash');
    const res = await env.http().post('/domains').set(auth()).send({ domain: DOMAIN });
    expect(res.status).toBe(201);
    const added = res.body as Domain;
    for (const record of added.records) dns.set(record.name, 'TXT', [record.value]);
    await started;
    await waitUntil(async () => {
      const list = await env.http().get(`/domains/project/${project.id}`).set(auth());
      return (list.body as Domain[]).some((d) => d.id === added.id && d.status === 'verified');
    }, 30_000);
    // Templates need the sender's domain verified.
    triggerWf = await buildJourney(env, project, {
      eventName: TRIGGER,
      steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: await template('triggered', 'Triggered') } }],
      transitions: [['trigger', 'mail']],
    });
    waitWf = await buildJourney(env, project, {
      eventName: ENTER,
      steps: [
        { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: PAID } },
        { key: 'mail', type: 'SEND_EMAIL', config: { templateId: await template('paid', 'Paid') } },
      ],
      transitions: [
        ['trigger', 'wait'],
        ['wait', 'mail'],
      ],
    });
    // The contacts whose executions will be waiting for PAID when it is tracked.
    for (const round of ROUNDS) await track(env, project, waiting(round), ENTER);
    await waitUntil(async () => {
      const rows = await executionsOf(waitWf);
      return rows.length === ROUNDS.length && rows.every((r) => r.status === 'WAITING' && r.waiting_for_event === PAID);
    }, 30_000);
  } catch (err) {
    await started.catch(() => undefined);
    throw new Error(`${(err as Error).message}\n${svc.output()}`);
  }
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await env?.close();
  await smtp?.close();
  await dns?.close();
});

/** POSTs to the running API and SIGKILLs it as soon as a 200's status line arrives. */
async function answeredThenKilled(path: string, body: Record<string, unknown>): Promise<Answer> {
  const answer = await postJson(svc.url(path), body, {
    headers: auth(),
    onResponse: (status) => status === 200 && void svc.killApi(),
  });
  await svc.killApi();
  return answer;
}

test('each request is answered 200, and the API is SIGKILLed right after each answer', async () => {
  const answers: Record<string, number> = {};
  const startedAt = Date.now();
  let apiUp = true; // since beforeAll
  for (const round of ROUNDS) {
    if (round === 'worker-down') await svc.killWorker();
    for (const [name, path, body] of [
      ['send', '/v1/send', { to: sendTo(round), from: `hello@${DOMAIN}`, subject: `Crash ${round}`, body: '<p>Once</p>' }],
      ['trigger', '/v1/track', { email: triggered(round), event: TRIGGER }],
      ['signal', '/v1/track', { email: waiting(round), event: PAID }],
    ] as const) {
      if (!apiUp) await svc.startApi();
      const answer = await answeredThenKilled(path, body);
      apiUp = false;
      answers[`${round} ${name}`] = answer.status;
      log(`${round} ${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
    }
  }
  log(`six answers and kills in ${Date.now() - startedAt} ms`);
  await svc.startWorker();
  log(`new worker polling ${Date.now() - startedAt} ms after the first request`);
  expect(answers).toEqual(Object.fromEntries(ROUNDS.flatMap((r) => ['send', 'trigger', 'signal'].map((n) => [`${r} ${n}`, 200]))));
}, 110_000);

/** Everything the answers promised has happened (or SETTLE_MS ran out): the tests below then look at what is there. */
let settled: Promise<void> | undefined;
const settle = () =>
  (settled ??= (async () => {
    const startedAt = Date.now();
    const expectedMail = ROUNDS.length * (sendTo('x').length + 2);
    let progress = '';
    await waitUntil(async () => {
      const done = [...(await executionsOf(triggerWf)), ...(await executionsOf(waitWf))].filter((r) => r.status === 'COMPLETED');
      const now = `${smtp.messages.length}/${expectedMail} messages, ${done.length}/${2 * ROUNDS.length} executions completed`;
      if (now !== progress) log(`${Date.now() - startedAt} ms: ${(progress = now)}`);
      return done.length >= 2 * ROUNDS.length && smtp.messages.length >= expectedMail;
    }, SETTLE_MS).catch(() => log(`not settled after ${SETTLE_MS} ms`));
    // Every tracked event dispatched and no email waiting for delivery: a duplicate would be here by now.
    await waitUntil(async () => !(await query(db(), 'select 1 from trigger_outbox where project_id = ?', [project.id])).length, 10_000).catch(() =>
      log('tracked events still waiting for the dispatcher'),
    );
    await deliveriesSettled(env, 'project_id = ?', [project.id], 10_000).catch(() => log('emails still waiting for delivery'));
    log(`settled ${Date.now() - startedAt} ms after the new worker`);
  })());

const messagesTo = (address: string) => smtp.messages.filter((m) => m.envelope.to.includes(address)).length;

test('every email of a /v1/send answered 200 is delivered, once', async () => {
  await settle();
  const addresses = ROUNDS.flatMap(sendTo);
  const rows = await query<{ to_email: string; status: string }>(
    db(),
    'select to_email, status from emails where project_id = ? and to_email = any(?)',
    [project.id, addresses],
  );
  expect(Object.fromEntries(addresses.map((a) => [a, rows.filter((r) => r.to_email === a).map((r) => r.status)]))).toEqual(
    Object.fromEntries(addresses.map((a) => [a, ['SENT']])),
  );
  expect(Object.fromEntries(addresses.map((a) => [a, messagesTo(a)]))).toEqual(Object.fromEntries(addresses.map((a) => [a, 1])));
}, SETTLE_MS + 10_000);

test('every journey a tracked event answered 200 triggers is started once and sends once', async () => {
  await settle();
  const rows = await executionsOf(triggerWf);
  const contacts = ROUNDS.map(triggered);
  expect(Object.fromEntries(contacts.map((c) => [c, rows.filter((r) => r.email === c).map((r) => r.status)]))).toEqual(
    Object.fromEntries(contacts.map((c) => [c, ['COMPLETED']])),
  );
  expect(Object.fromEntries(contacts.map((c) => [c, messagesTo(c)]))).toEqual(Object.fromEntries(contacts.map((c) => [c, 1])));
}, SETTLE_MS + 10_000);

test('every execution waiting for a tracked event answered 200 is signalled and moves on, once', async () => {
  await settle();
  const rows = await executionsOf(waitWf);
  const contacts = ROUNDS.map(waiting);
  expect(Object.fromEntries(contacts.map((c) => [c, rows.filter((r) => r.email === c).map((r) => r.status)]))).toEqual(
    Object.fromEntries(contacts.map((c) => [c, ['COMPLETED']])),
  );
  expect(Object.fromEntries(contacts.map((c) => [c, messagesTo(c)]))).toEqual(Object.fromEntries(contacts.map((c) => [c, 1])));
}, SETTLE_MS + 10_000);
