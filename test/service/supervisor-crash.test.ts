import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { type Domain, waitUntil } from '../helpers/sending';
import { accepts, freePorts, killService, rolePids, type Service, startService, stopService, waitForHealthy } from '../helpers/service-process';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { postJson } from '../helpers/split-service';

/**
 * `tidings start` (a supervisor with the API and the worker as its children, cli/supervise.ts): its
 * delivery engine claims /v1/send's emails, and the supervisor alone is SIGKILLed while they are
 * held. The children must not outlive it. Its relay accepts connections and never greets, so every
 * email it claimed is still in the worker's memory or in flight, and none reached a relay. A new
 * `tidings start` (the relay now a real one) must deliver each of them once, when their lease runs out.
 */
const DOMAIN = 'supervisor-crash.test';
const LEASE_SECONDS = 5;
const tag = Date.now();
const to = [0, 1, 2].map((i) => `supervised-${i}-${tag}@example.org`);

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

let dns: DnsServer;
let smtp: SmtpSink;
let silent: net.Server;
let env: TestEnv;
let project: ProjectWithKeys;
let dataDir: string;
const services: Service[] = [];

/** `tidings start` on the test run's PostgreSQL and Temporal server. */
async function startSupervised(smtpUrl: string): Promise<Service> {
  const ports = await freePorts();
  const service = startService(dataDir, ports, {
    env: {
      NODE_ENV: 'test',
      PUBLIC_URL: `http://127.0.0.1:${ports.api}`,
      DATABASE_URL: process.env.TEST_DATABASE_URL!,
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS!,
      TEMPORAL_TASK_QUEUE: env.taskQueue,
      SMTP_URL: smtpUrl,
      DNS_SERVERS: dns.address,
      DOMAIN_CHECK_INTERVAL_SECONDS: '1',
      DELIVERY_LEASE_SECONDS: String(LEASE_SECONDS),
      DATABASE_POOL_MAX: '10',
    },
  });
  services.push(service);
  await waitForHealthy(service);
  return service;
}

const emailRows = () =>
  query<{ to_email: string; status: string; attempts: number }>(
    env.orm.em.fork(),
    `select to_email, status, attempts
     from emails where project_id = ? and to_email = any(?) order by to_email`,
    [project.id, to],
  );

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  // A relay that takes the connection and never says a word: sends wait for its greeting.
  silent = net.createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  // This API starts the domain's verification workflow, and its interval is the re-check period: a first
  // check that runs before the test publishes the records must not leave the domain pending for 5 minutes.
  env = await startTestEnv({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1' });
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-supervisor-'));
  project = await env.project('supervisor crash');
}, 60_000);

afterAll(async () => {
  for (const s of services) if (!s.hasExited()) await stopService(s, 20_000).catch(() => killService(s));
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  await env?.close();
  await new Promise((resolve) => silent?.close(resolve));
  await smtp?.close();
  await dns?.close();
});

test('a SIGKILLed supervisor takes its children with it; the emails they held are delivered once by the next start', async () => {
  const first = await startSupervised(`smtp://127.0.0.1:${(silent.address() as net.AddressInfo).port}`);
  const auth = bearer(project.secretKey);
  const added = (await env.http().post('/domains').set(auth).send({ domain: DOMAIN })).body as Domain;
  for (const record of added.records) dns.set(record.name, 'TXT', [record.value]);
  // Verified by the verification workflow, which the process's worker runs.
  await waitUntil(async () => {
    const list = await env.http().get(`/domains/project/${project.id}`).set(auth);
    return (list.body as Domain[]).some((d) => d.id === added.id && d.status === 'verified');
  }, 30_000);

  const url = `http://127.0.0.1:${first.ports.api}/v1/send`;
  const answers = await Promise.all(
    to.map((address) => postJson(url, { to: address, from: `hello@${DOMAIN}`, subject: 'Once', body: '<p>Once</p>' }, { headers: { authorization: auth.Authorization } })),
  );
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  // Claimed, and stuck at the silent relay.
  await waitUntil(async () => (await emailRows()).every((r) => r.status === 'SENDING'), 30_000);
  expect(await emailRows()).toEqual(to.map((address) => ({ to_email: address, status: 'SENDING', attempts: 1 })));
  const { api: apiProcess, worker } = rolePids(first.child.pid!);
  const children = [apiProcess, worker];
  process.kill(first.child.pid!, 'SIGKILL');
  await first.exited;
  // The API and the worker exit as soon as their channel to the supervisor closes.
  await waitUntil(async () => children.every((pid) => !isAlive(pid)) && !(await accepts(first.ports.api)), 10_000);

  await startSupervised(smtp.url);
  await waitUntil(async () => (await emailRows()).every((r) => r.status === 'SENT'), (LEASE_SECONDS + 30) * 1000);
  // Claimed again when the lease ran out: a second attempt.
  expect((await emailRows()).map((r) => [r.status, r.attempts])).toEqual(to.map(() => ['SENT', 2]));
  // A message reaches the sink before its 250, and SENT is written after it: all are in.
  for (const address of to) expect(smtp.messages.filter((m) => m.envelope.to.includes(address))).toHaveLength(1);
}, 150_000);

// With the kernel's autogroups a nice value counts only within its session (cli/priority.ts).
const autogroups = (() => {
  try {
    return readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  } catch {
    return false;
  }
})();
const autogroupNice = (pid: number) => readFileSync(`/proc/${pid}/autogroup`, 'utf8').trim().split(' ')[2];
/** A /proc stat file's fields after the command: session is [3], nice [16]. */
function statFields(file: string): string[] {
  const stat = readFileSync(file, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}
const sessionOf = (pid: number) => Number(statFields(`/proc/${pid}/stat`)[3]);
/** The nice value of each thread of a process. */
const threadNiceness = (pid: number) => readdirSync(`/proc/${pid}/task`).map((tid) => Number(statFields(`/proc/${pid}/task/${tid}/stat`)[16]));

test('the worker runs at a lower priority than the API, thread and session; when one of them dies, tidings start stops the other and exits 1, naming it', async () => {
  const service = await startSupervised(smtp.url);
  const { api: apiProcess, worker } = rolePids(service.child.pid!);
  const children = [apiProcess, worker];

  // WORKER_NICENESS, 10 by default, on top of what the service was started with.
  const started = threadNiceness(apiProcess);
  expect(new Set(started).size).toBe(1);
  const workerThreads = threadNiceness(worker);
  expect(workerThreads.length).toBeGreaterThan(5);
  expect(new Set(workerThreads)).toEqual(new Set([Math.min(19, started[0]! + 10)]));
  // Each leads a session of its own; with the kernel's autogroups the worker's session is lowered too.
  for (const pid of [worker, apiProcess]) expect(sessionOf(pid)).toBe(pid);
  if (autogroups) expect([worker, apiProcess].map(autogroupNice)).toEqual(['10', '0']);

  process.kill(worker, 'SIGKILL');

  const { code } = await service.exited;
  expect(code).toBe(1);
  expect(service.stderr()).toContain('The worker process exited (signal SIGKILL); the service stopped.');
  expect(children.every((pid) => !isAlive(pid))).toBe(true);
  expect(await accepts(service.ports.api)).toBe(false);
}, 120_000);
