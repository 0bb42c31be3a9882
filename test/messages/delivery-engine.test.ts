import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { type Domain, waitUntil } from '../helpers/sending';
import { type SmtpMessage, type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { childWorkerEnv, spawnWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/**
 * The delivery engine when its worker dies mid-batch (a SIGKILL, no goodbye), and when every
 * PostgreSQL connection of the service is terminated under it: the worker is its own process, the
 * API is this one. Every email still goes out; an email goes twice only if it is inside SMTP's own
 * window — the relay had taken it, the worker had not yet committed SENT — and the tests count
 * that window at the moment of the kill.
 */

const DOMAIN = 'engine-kill.test';
const N = 400;
const LEASE_SECONDS = '5';
/** application_name of every connection of this file's API and worker, so only theirs are terminated (files share the run's database). */
const APP_NAME = `engine-test-${randomUUID().slice(0, 8)}`;
let env: TestEnv;
let dns: DnsServer;
let smtp: SmtpSink;
let child: WorkerProcess | undefined;
let project: ProjectWithKeys;
/** Straight to PostgreSQL under its own name: terminates the service's backends and reads what was written. */
let admin: Client;

const workerEnv = () =>
  childWorkerEnv(env.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address }, { DELIVERY_LEASE_SECONDS: LEASE_SECONDS, PGAPPNAME: APP_NAME });
const emailIdOf = (m: SmtpMessage) => /^Message-ID:\s*<([^@>]+)@/im.exec(m.raw.toString('utf8'))?.[1];
const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[engine] ${msg}\n`);

beforeAll(async () => {
  // knex prints "Connection Error: …" with console.log for each terminated connection its pool drops: expected here.
  const consoleLog = console.log;
  jest.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
    if (!String(args[0]).includes('Connection Error')) consoleLog(...args);
  });
  // node-postgres names its connections after PGAPPNAME: the API's pool here, the worker's pool and LISTEN connection there.
  process.env.PGAPPNAME = APP_NAME;
  admin = new Client({ connectionString: process.env.TEST_DATABASE_URL, application_name: 'engine-test-admin' });
  await admin.connect();
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  env = await startTestEnv({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1', DELIVERY_LEASE_SECONDS: LEASE_SECONDS });
  const spawned = spawnWorkerProcess(workerEnv());
  try {
    project = await env.project('engine kill');
    const res = await env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: DOMAIN });
    for (const record of (res.body as Domain).records) dns.set(record.name, 'TXT', [record.value]);
    child = await spawned;
    await waitUntil(async () => {
      const list = await env.http().get(`/domains/project/${project.id}`).set(bearer(project.secretKey));
      return (list.body as Domain[]).some((d) => d.status === 'verified');
    }, 30_000);
  } catch (err) {
    await spawned.then((c) => c.stop()).catch(() => undefined);
    throw err;
  }
}, 90_000);

afterAll(async () => {
  await child?.stop();
  await env?.close();
  await smtp?.close();
  await dns?.close();
  await admin?.end();
});

test('a worker SIGKILLed mid-batch: no email lost, none sent twice outside the 250→commit window', async () => {
  // Each message waits 100 ms for its 250: the engines always have some taken by the relay and not yet acknowledged.
  smtp.acceptDelayMs = 100;
  const ids: string[] = [];
  for (let i = 0; i < N / 10; i++) {
    const to = Array.from({ length: 10 }, (_, j) => `kill-${i * 10 + j}@example.org`);
    const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `hello@${DOMAIN}`, subject: 'S', body: 'B' });
    expect(res.status).toBe(200);
    ids.push(...(res.body.data.emails as { email: string }[]).map((e) => e.email));
  }
  await waitUntil(async () => smtp.messages.length >= N / 4, 30_000);
  await child!.kill();
  child = undefined;
  // What the dead worker left: the relay has these, and PostgreSQL says which it had marked SENT.
  const atKill = new Set(smtp.messages.map(emailIdOf));
  const sent = new Set(
    (await query<{ id: string }>(env.orm.em.fork(), `select id from emails where id = any(?::uuid[]) and status = 'SENT'`, [ids])).map((r) => r.id),
  );
  const window = [...atKill].filter((id) => id && !sent.has(id));
  log(`killed with ${atKill.size} of ${N} at the relay, ${sent.size} marked SENT, ${window.length} in the 250→commit window`);
  expect(atKill.size).toBeLessThan(N);

  smtp.acceptDelayMs = 0;
  child = await spawnWorkerProcess(workerEnv());
  await waitUntil(async () => {
    const rows = await query<{ n: string }>(env.orm.em.fork(), `select count(*) as n from emails where id = any(?::uuid[]) and status = 'SENT'`, [ids]);
    return Number(rows[0]!.n) === N;
  }, 60_000);
  // A message reaches the sink before its 250 and SENT is written after it: every arrival is in.

  const arrivals = new Map<string, number>();
  for (const m of smtp.messages) arrivals.set(emailIdOf(m)!, (arrivals.get(emailIdOf(m)!) ?? 0) + 1);
  expect(ids.filter((id) => !arrivals.has(id))).toEqual([]);
  const twice = [...arrivals].filter(([, n]) => n > 1).map(([id]) => id);
  log(`${twice.length} sent twice`);
  // Only emails inside the window at the kill may go twice, and at most twice.
  expect(twice.filter((id) => !window.includes(id))).toEqual([]);
  expect([...arrivals.values()].every((n) => n <= 2)).toBe(true);
}, 120_000);

/** What an administrator (or a failover) does to the service's connections: all of them, pools and LISTEN alike. */
async function terminateServiceConnections(): Promise<number> {
  const { rows } = await admin.query<{ terminated: boolean }>(
    `select pg_terminate_backend(pid) as terminated from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid() and application_name = $1`,
    [APP_NAME],
  );
  return rows.filter((r) => r.terminated).length;
}

const sentIds = async (ids: string[]) =>
  new Set((await admin.query<{ id: string }>(`select id from emails where id = any($1::uuid[]) and status = 'SENT'`, [ids])).rows.map((r) => r.id));

/** A client honouring 503 DATABASE_UNAVAILABLE: this process's pool may hand out a terminated connection once. */
async function sendRetrying(body: Record<string, unknown>) {
  for (let attempt = 1; ; attempt++) {
    const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send(body);
    if (res.status !== 503 || attempt >= 5) return res;
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('PostgreSQL connections terminated twice while the engine sends: every email SENT, none twice outside the 250→commit window, and LISTEN comes back', async () => {
  const M = 300;
  // Each message waits 200 ms for its 250: the kills land with sends in flight and marks being written.
  smtp.acceptDelayMs = 200;
  smtp.clear();
  const ids: string[] = [];
  for (let i = 0; i < M / 10; i++) {
    const to = Array.from({ length: 10 }, (_, j) => `pgkill-${i * 10 + j}@example.org`);
    const res = await sendRetrying({ to, from: `hello@${DOMAIN}`, subject: 'S', body: 'B' });
    expect(res.status).toBe(200);
    ids.push(...(res.body.data.emails as { email: string }[]).map((e) => e.email));
  }
  const atRelay = () => new Set(smtp.messages.map(emailIdOf));

  // Each kill: what PostgreSQL had as SENT just before, what the relay had just after. An email the
  // relay took and PostgreSQL did not have as SENT is in the window; only those may go twice.
  const window = new Set<string>();
  let terminated = 0;
  let lastKillAt = '';
  for (const share of [4, 2]) {
    await waitUntil(async () => smtp.messages.length >= M / share, 30_000);
    const sent = await sentIds(ids);
    lastKillAt = (await admin.query<{ now: string }>('select now()::text as now')).rows[0]!.now;
    const n = await terminateServiceConnections();
    terminated += n;
    const taken = atRelay();
    for (const id of taken) if (id && !sent.has(id)) window.add(id);
    log(`terminated ${n} connections with ${taken.size} of ${M} at the relay, ${sent.size} marked SENT`);
    expect(taken.size).toBeLessThan(M);
  }
  // The worker's pool and LISTEN connection, and this process's pool.
  expect(terminated).toBeGreaterThanOrEqual(2);

  smtp.acceptDelayMs = 0;
  await waitUntil(async () => (await sentIds(ids)).size === M, 60_000);
  // Every arrival is in: SENT is written after the sink's 250.
  const arrivals = new Map<string, number>();
  for (const m of smtp.messages) arrivals.set(emailIdOf(m)!, (arrivals.get(emailIdOf(m)!) ?? 0) + 1);
  expect(ids.filter((id) => !arrivals.has(id))).toEqual([]);
  const twice = [...arrivals].filter(([, n]) => n > 1).map(([id]) => id);
  log(`${window.size} in the 250→commit window at the kills, ${twice.length} sent twice`);
  expect(twice.filter((id) => !window.has(id))).toEqual([]);
  expect([...arrivals.values()].every((n) => n <= 2)).toBe(true);
  // Nothing left claimed: no SENDING row, no retry workflow needed.
  const left = await admin.query(`select id, status from emails where id = any($1::uuid[]) and status <> 'SENT'`, [ids]);
  expect(left.rows).toEqual([]);

  // The worker's LISTEN connection is a new one, opened after the last kill.
  await waitUntil(async () => {
    const { rows } = await admin.query(
      `select 1 from pg_stat_activity where application_name = $1 and query = 'listen tidings_outbox' and backend_start > $2::timestamptz`,
      [APP_NAME, lastKillAt],
    );
    return rows.length > 0;
  }, 10_000);
  // And a new email is picked up (by its NOTIFY; at worst by the engine's one-second look).
  const res = await sendRetrying({ to: 'after-kill@example.org', from: `hello@${DOMAIN}`, subject: 'S', body: 'B' });
  expect(res.status).toBe(200);
  const answeredAt = Date.now();
  const afterId = res.body.data.emails[0].email as string;
  await waitUntil(async () => (await sentIds([afterId])).size === 1, 10_000);
  const arrived = smtp.messages.find((m) => emailIdOf(m) === afterId)!;
  log(`a new email reached the relay ${arrived.receivedAt.getTime() - answeredAt} ms after its 200`);
}, 150_000);
