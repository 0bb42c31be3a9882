import { AppError } from '../../errors';
import type { EntityManager } from '@mikro-orm/postgresql';
import { IDEMPOTENCY_WAIT_MS, idempotent, type StoredResponse } from '../../db/projects/idempotency';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney, type BuiltJourney } from '../helpers/journeys';
import { deliveriesSettled, type Domain, waitUntil } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { type Answer, postJson, splitService, type SplitService, SPLIT_RATE_LIMIT } from '../helpers/split-service';

/**
 * "A key never outlives the work it guards." The API runs as its own process (`tidings start
 * --api`) beside a worker process; requests with distinct Idempotency-Keys are in flight when the
 * API is SIGKILLed; a new API is started and each request is retried with its key until it gets
 * its 200. Each must then have been processed exactly once: one email row per /v1/send key, each
 * delivered once; one event per /v1/track key, and the journey it triggers started once.
 *
 * Before them, the claim itself (db/projects/idempotency.ts) in-process: a concurrent request with the key
 * waits for the holder's transaction and replays its answer, or runs if the holder rolled back.
 */
const DOMAIN = 'idem-crash.test';
const N = 16;
/** Between the starts of the keyed requests (crashWhileInFlight). */
const STAGGER_MS = 3;
/** From the kill: the new API starts, then every retry gets its 200. */
const RETRY_WINDOW_MS = 45_000;

let dns: DnsServer;
let smtp: SmtpSink;
let env: TestEnv;
let svc: SplitService;
let project: ProjectWithKeys;

const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[idempotency-crash] ${msg}\n`);
const db = () => env.orm.em.fork();

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  // This API starts the domain's verification workflow, and its interval is the re-check period: a first
  // check that runs before the test publishes the records must not leave the domain pending for 5 minutes.
  env = await startTestEnv({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1', RATE_LIMIT_PER_MINUTE: SPLIT_RATE_LIMIT });
  svc = await splitService(env.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address });
  const started = Promise.all([svc.startWorker(), svc.startApi()]);
  try {
    project = await env.project('idempotency crash');
    // The domain is verified by the worker's verification workflow.
    const res = await env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: DOMAIN });
    expect(res.status).toBe(201);
    const added = res.body as Domain;
    for (const record of added.records) dns.set(record.name, 'TXT', [record.value]);
    await started;
    await waitUntil(async () => {
      const list = await env.http().get(`/domains/project/${project.id}`).set(bearer(project.secretKey));
      return (list.body as Domain[]).some((d) => d.id === added.id && d.status === 'verified');
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

describe('idempotent(): the key is claimed inside the work transaction', () => {
  const ok = (body: unknown) => async () => ({ status: 200, body });

  /**
   * Work that holds its key until released: `claimed` resolves once it runs (the claim is the
   * transaction's first statement, so the key is taken then) with the backend of its transaction.
   */
  function heldWork<T>(result: () => T) {
    let release!: () => void;
    let claimedBy!: (pid: number) => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const claimed = new Promise<number>((resolve) => (claimedBy = resolve));
    const work = async (tx: EntityManager) => {
      claimedBy((await queryOne<{ pid: number }>(tx, 'select pg_backend_pid() as pid'))!.pid);
      await released;
      return result();
    };
    return { work, claimed, release };
  }

  /** Resolves once a statement of another backend waits for a lock that the holder's backend holds. */
  const blockedBy = (holderPid: number) =>
    waitUntil(() => queryOne(db(), 'select 1 as blocked from pg_stat_activity where ? = any(pg_blocking_pids(pid))', [holderPid]), {
      timeoutMs: 5_000,
      what: 'a request waiting for the holder of its key',
    });

  test('a concurrent request with the key waits for the holder and replays its committed answer', async () => {
    const key = `wait-${Date.now()}`;
    const held = heldWork(() => ({ status: 200, body: { first: true } }));
    const holder = idempotent(db(), project.id, 'test', key, { a: 1 }, held.work);
    const holderPid = await held.claimed;
    let secondRan = false;
    let secondDone = false;
    const second = idempotent(db(), project.id, 'test', key, { a: 1 }, async () => {
      secondRan = true;
      return { status: 200, body: { second: true } };
    }).finally(() => (secondDone = true));
    await blockedBy(holderPid);
    expect(secondDone).toBe(false);
    held.release();
    await expect(holder).resolves.toEqual({ status: 200, body: { first: true }, replayed: false });
    await expect(second).resolves.toEqual({ status: 200, body: { first: true }, replayed: true });
    expect(secondRan).toBe(false);
  });

  test('the holder fails: nothing of it stays, the waiting request runs', async () => {
    const key = `rollback-${Date.now()}`;
    const held = heldWork((): StoredResponse => {
      throw new Error('work failed');
    });
    const holder = idempotent(db(), project.id, 'test', key, { a: 1 }, held.work);
    const holderPid = await held.claimed;
    const second = idempotent(db(), project.id, 'test', key, { a: 1 }, ok({ second: true }));
    await blockedBy(holderPid);
    held.release();
    await expect(holder).rejects.toThrow('work failed');
    await expect(second).resolves.toEqual({ status: 200, body: { second: true }, replayed: false });
  });

  test('a different body is IDEMPOTENCY_KEY_REUSED, without running', async () => {
    const key = `reused-${Date.now()}`;
    await idempotent(db(), project.id, 'test', key, { a: 1 }, ok({ first: true }));
    let ran = false;
    const other = idempotent(db(), project.id, 'test', key, { a: 2 }, async () => {
      ran = true;
      return { status: 200, body: {} };
    });
    await expect(other).rejects.toMatchObject({ status: 409, code: 'IDEMPOTENCY_KEY_REUSED' });
    expect(ran).toBe(false);
  });

  test('a holder that takes longer than the bounded wait: 409 IDEMPOTENCY_KEY_IN_PROGRESS, and its work still counts', async () => {
    const key = `slow-${Date.now()}`;
    const held = heldWork(() => ({ status: 200, body: { slow: true } }));
    const holder = idempotent(db(), project.id, 'test', key, { a: 1 }, held.work);
    await held.claimed;
    const startedAt = Date.now();
    const err = await idempotent(db(), project.id, 'test', key, { a: 1 }, ok({ second: true })).catch((e: unknown) => e);
    const waited = Date.now() - startedAt;
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 409, code: 'IDEMPOTENCY_KEY_IN_PROGRESS' });
    expect(waited).toBeGreaterThanOrEqual(IDEMPOTENCY_WAIT_MS - 100);
    expect(waited).toBeLessThan(IDEMPOTENCY_WAIT_MS + 3_000);
    held.release();
    await expect(holder).resolves.toMatchObject({ replayed: false });
    await expect(idempotent(db(), project.id, 'test', key, { a: 1 }, ok({ third: true }))).resolves.toEqual({
      status: 200,
      body: { slow: true },
      replayed: true,
    });
  }, IDEMPOTENCY_WAIT_MS + 15_000);

  test('a key left claimed without an answer (by the claim-before-work scheme) and an expired one are taken over', async () => {
    const stale = `stale-${Date.now()}`;
    const expired = `expired-${Date.now()}`;
    await query(
      db(),
      `insert into idempotency_keys (project_id, scope, key, request_hash, response_status, response_body, created_at)
       values (?, 'test', ?, 'x', null, null, now()), (?, 'test', ?, 'x', 200, '{"old":true}', now() - interval '25 hours')`,
      [project.id, stale, project.id, expired],
    );
    await expect(idempotent(db(), project.id, 'test', stale, { a: 1 }, ok({ fresh: 1 }))).resolves.toEqual({ status: 200, body: { fresh: 1 }, replayed: false });
    await expect(idempotent(db(), project.id, 'test', expired, { a: 1 }, ok({ fresh: 2 }))).resolves.toEqual({ status: 200, body: { fresh: 2 }, replayed: false });
    await expect(idempotent(db(), project.id, 'test', expired, { a: 1 }, ok({ fresh: 3 }))).resolves.toEqual({ status: 200, body: { fresh: 2 }, replayed: true });
  });
});

interface Keyed {
  key: string;
  body: Record<string, unknown>;
}

interface Outcome {
  key: string;
  /** The answer before the kill, if one arrived. */
  before: Answer | undefined;
  /** The last answer of the retries (a 200 unless the window ran out or something else came back). */
  final: Answer | undefined;
  tries: number;
  inProgress: number;
  lastError: string | undefined;
}

/** Retries the request with its key until a 200, through connection errors, 503 and 409 IN_PROGRESS. */
async function retryUntilOk(path: string, r: Keyed, deadline: number): Promise<Omit<Outcome, 'before'>> {
  const out: Omit<Outcome, 'before'> = { key: r.key, final: undefined, tries: 0, inProgress: 0, lastError: undefined };
  const answered = async () => {
    out.tries++;
    try {
      const res = await postJson(svc.url(path), r.body, { headers: { ...bearer(project.secretKey), 'Idempotency-Key': r.key } });
      out.final = res;
      const code = (res.body as { error?: { code?: string } }).error?.code;
      if (code === 'IDEMPOTENCY_KEY_IN_PROGRESS') out.inProgress++;
      // Anything but a 503 or a 409 IN_PROGRESS is an answer: the 200, or a wrong one.
      return res.status !== 503 && code !== 'IDEMPOTENCY_KEY_IN_PROGRESS';
    } catch (err) {
      out.lastError = (err as Error).message;
      return false;
    }
  };
  // The client's pause between tries; what a window that ran out left is in `out`.
  await waitUntil(answered, { timeoutMs: Math.max(0, deadline - Date.now()), intervalMs: 200 }).catch(() => undefined);
  return out;
}

/**
 * Fires every request at once and SIGKILLs the API when the first 200 comes back, so the others
 * are cut off somewhere between arriving and answering; starts a new API and retries each one.
 */
async function crashWhileInFlight(path: string, requests: Keyed[]): Promise<{ outcomes: Outcome[]; cutOff: number }> {
  let killed = false;
  // Started a few milliseconds apart, not all at once: a burst answered in one turn of the API's
  // event loop can reach the client whole before the kill lands, leaving nothing in flight.
  const first = await Promise.allSettled(
    requests.map(async (r, i) => {
      await new Promise((resolve) => setTimeout(resolve, i * STAGGER_MS));
      return postJson(svc.url(path), r.body, {
        headers: { ...bearer(project.secretKey), 'Idempotency-Key': r.key },
        onResponse: (status) => {
          if (status === 200 && !killed) {
            killed = true;
            void svc.killApi();
          }
        },
      });
    }),
  );
  await svc.killApi();
  const killedAt = Date.now();
  const before = first.map((s) => (s.status === 'fulfilled' ? s.value : undefined));
  const cutOff = before.filter((b) => b === undefined).length;
  log(`${path}: ${N - cutOff} answered before the kill (${before.filter((b) => b?.status === 200).length} with 200), ${cutOff} cut off`);
  const restarted = svc.startApi();
  const retried = await Promise.all(requests.map((r) => retryUntilOk(path, r, killedAt + RETRY_WINDOW_MS)));
  await restarted;
  log(`${path}: retries done ${Date.now() - killedAt} ms after the kill; 409 IN_PROGRESS answers: ${retried.reduce((n, o) => n + o.inProgress, 0)}`);
  return { outcomes: retried.map((o, i) => ({ ...o, before: before[i] })), cutOff };
}

/** What did not end in a 200, in a form a failure message can show. */
const notOk = (outcomes: Outcome[]) =>
  outcomes
    .filter((o) => o.final?.status !== 200)
    .map((o) => ({ key: o.key, tries: o.tries, inProgress: o.inProgress, status: o.final?.status, body: o.final?.body, error: o.lastError }));

/** Answered 200 before the kill, then replayed the same answer. */
function expectReplays(outcomes: Outcome[]) {
  for (const o of outcomes.filter((x) => x.before?.status === 200 && x.final?.status === 200)) {
    expect({ key: o.key, replayed: o.final!.headers['idempotent-replayed'], body: o.final!.body }).toEqual({
      key: o.key,
      replayed: 'true',
      body: o.before!.body,
    });
  }
}

/** Exactly one message at the sink for each address, once none of their emails waits for delivery any more. */
async function expectOneMessageEach(addresses: string[], timeoutMs: number) {
  const mine = () => smtp.messages.filter((m) => m.envelope.to.some((t) => addresses.includes(t)));
  await waitUntil(async () => mine().length >= addresses.length, timeoutMs).catch(() => undefined);
  await deliveriesSettled(env, 'project_id = ? and to_email = any(?)', [project.id, addresses]);
  const counts = Object.fromEntries(addresses.map((a) => [a, smtp.messages.filter((m) => m.envelope.to.includes(a)).length]));
  expect(counts).toEqual(Object.fromEntries(addresses.map((a) => [a, 1])));
}

test('/v1/send: SIGKILL with keyed requests in flight; each retried with its key is processed exactly once', async () => {
  const tag = Date.now();
  const requests = Array.from({ length: N }, (_, i) => ({
    key: `send-${tag}-${i}`,
    body: { to: `send-${tag}-${i}@example.org`, from: `hello@${DOMAIN}`, subject: `Crash ${i}`, body: `<p>Message ${i}</p>` },
  }));
  const addresses = requests.map((r) => r.body.to);
  const { outcomes, cutOff } = await crashWhileInFlight('/v1/send', requests);
  // Without a request cut off by the kill, this run proved nothing.
  expect(cutOff).toBeGreaterThan(0);
  expect(notOk(outcomes)).toEqual([]);
  expectReplays(outcomes);

  // One email row per key, and it is the one the key's answer names.
  const rows = await query<{ id: string; to_email: string }>(
    db(),
    'select id, to_email from emails where project_id = ? and to_email = any(?) order by to_email',
    [project.id, addresses],
  );
  const byAddress = (a: string) => rows.filter((r) => r.to_email === a).map((r) => r.id);
  expect(Object.fromEntries(addresses.map((a) => [a, byAddress(a).length]))).toEqual(Object.fromEntries(addresses.map((a) => [a, 1])));
  for (const [i, o] of outcomes.entries()) {
    const answered = (o.final?.body as { data?: { emails?: { email: string }[] } }).data?.emails?.map((e) => e.email);
    expect({ key: o.key, emails: answered }).toEqual({ key: o.key, emails: byAddress(addresses[i]!) });
  }
  await expectOneMessageEach(addresses, 30_000);
}, 110_000);

test('/v1/track: SIGKILL with keyed requests in flight; one event per key, and the journey it triggers runs once', async () => {
  const tag = Date.now();
  const event = `crash-signup-${tag}`;
  const tpl = await env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({ name: `welcome ${tag}`, subject: 'Welcome', body: '<p>Welcome {{email}}</p>', from: `hello@${DOMAIN}`, type: 'TRANSACTIONAL' });
  expect(tpl.status).toBe(201);
  const wf: BuiltJourney = await buildJourney(env, project, {
    eventName: event,
    steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } }],
    transitions: [['trigger', 'mail']],
  });
  const requests = Array.from({ length: N }, (_, i) => ({
    key: `track-${tag}-${i}`,
    body: { email: `track-${tag}-${i}@example.org`, event, data: { n: i } },
  }));
  const addresses = requests.map((r) => r.body.email);
  const { outcomes, cutOff } = await crashWhileInFlight('/v1/track', requests);
  expect(cutOff).toBeGreaterThan(0);
  expect(notOk(outcomes)).toEqual([]);
  expectReplays(outcomes);

  // One event per key, and it is the one the key's answer names.
  const events = await query<{ email: string; id: string }>(
    db(),
    `select c.email, e.id from events e join contacts c on c.id = e.contact_id
      where e.project_id = ? and e.name = ? order by c.email`,
    [project.id, event],
  );
  const eventsOf = (a: string) => events.filter((e) => e.email === a).map((e) => e.id);
  expect(Object.fromEntries(addresses.map((a) => [a, eventsOf(a).length]))).toEqual(Object.fromEntries(addresses.map((a) => [a, 1])));
  for (const [i, o] of outcomes.entries()) {
    const answered = (o.final?.body as { data?: { event?: string } }).data?.event;
    expect({ key: o.key, event: answered }).toEqual({ key: o.key, event: eventsOf(addresses[i]!)[0] });
  }

  // Each event's journey: started once (one execution per contact), finished, its email sent once.
  const executions = async () =>
    query<{ email: string; status: string }>(
      db(),
      `select c.email, x.status from workflow_executions x join contacts c on c.id = x.contact_id where x.workflow_id = ? order by c.email`,
      [wf.id],
    );
  const finished = (rows: { status: string }[]) => rows.length >= N && rows.every((r) => r.status === 'COMPLETED');
  await waitUntil(async () => finished(await executions()), 30_000).catch(() => undefined);
  const rows = await executions();
  expect(Object.fromEntries(addresses.map((a) => [a, rows.filter((r) => r.email === a).map((r) => r.status)]))).toEqual(
    Object.fromEntries(addresses.map((a) => [a, ['COMPLETED']])),
  );
  await expectOneMessageEach(addresses, 10_000);
}, 110_000);
