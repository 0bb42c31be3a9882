import type { ProjectWithKeys } from '../db/projects';
import { query } from '../db/sql';
import { type DnsServer, startDnsServer } from './helpers/dns';
import { bearer, startTestEnv, type TestEnv } from './helpers/env';
import { type Domain, waitUntil } from './helpers/sending';
import { type SmtpMessage, type SmtpSink, startSmtpSink } from './helpers/smtp';
import { childWorkerEnv, spawnWorkerProcess, type WorkerProcess } from './helpers/worker-process';

/**
 * The delivery engine when its worker dies mid-batch (a SIGKILL, no goodbye): the worker is its
 * own process, the API is this one. Every email still goes out; an email goes twice only if it is
 * inside SMTP's own window — the relay had taken it, the worker had not yet committed SENT — and
 * the test counts that window at the moment of the kill.
 */

const DOMAIN = 'engine-kill.test';
const N = 400;
const LEASE_SECONDS = '5';
let env: TestEnv;
let dns: DnsServer;
let smtp: SmtpSink;
let child: WorkerProcess | undefined;
let project: ProjectWithKeys;

const workerEnv = () => childWorkerEnv(env.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address }, { DELIVERY_LEASE_SECONDS: LEASE_SECONDS });
const emailIdOf = (m: SmtpMessage) => /^Message-ID:\s*<([^@>]+)@/im.exec(m.raw.toString('utf8'))?.[1];
const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[engine] ${msg}\n`);

beforeAll(async () => {
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
  await new Promise((r) => setTimeout(r, 500));

  const arrivals = new Map<string, number>();
  for (const m of smtp.messages) arrivals.set(emailIdOf(m)!, (arrivals.get(emailIdOf(m)!) ?? 0) + 1);
  expect(ids.filter((id) => !arrivals.has(id))).toEqual([]);
  const twice = [...arrivals].filter(([, n]) => n > 1).map(([id]) => id);
  log(`${twice.length} sent twice`);
  // Only emails inside the window at the kill may go twice, and at most twice.
  expect(twice.filter((id) => !window.includes(id))).toEqual([]);
  expect([...arrivals.values()].every((n) => n <= 2)).toBe(true);
}, 120_000);
