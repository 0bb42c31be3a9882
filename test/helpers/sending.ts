import type { Clock } from '../../db/clock';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { startDnsServer, type DnsServer } from './dns';
import { bearer, startTestEnv, type TestEnv } from './env';
import { startSmtpSink, type SmtpSink } from './smtp';
import { waitUntil } from './wait';

export { waitUntil };

/**
 * What the tests that send mail share: the polling helper (wait.ts), and an environment that can deliver, i.e.
 * the API and a worker (startTestEnv) whose resolver asks a test DNS server and whose mailer hands
 * mail to an SMTP sink, with short domain-check and send-retry periods.
 *
 *   let sending: SendingEnv;
 *   beforeAll(async () => {
 *     sending = await startSendingEnv();              // or startSendingEnv({ PUBLIC_URL: ... })
 *     ({ env, dns, smtp } = sending);
 *     project = await env.project('my project');
 *     await sending.verifiedDomain(project, 'acme.test');
 *   });
 *   afterAll(() => sending.close());
 */

/** A domain as the API returns it (POST /domains, GET /domains/project/:id, GET /domains/:id/verify). */
export type RecordState = 'ok' | 'missing' | 'mismatch' | 'unreachable';
export interface DnsRecord {
  type: string;
  name: string;
  value: string;
  purpose: string;
}
export interface Domain {
  id: string;
  projectId: string;
  domain: string;
  status: 'pending' | 'verified';
  records: DnsRecord[];
  lastCheck: { verified: boolean; conclusive: boolean; records: { dkim: RecordState; spf: RecordState; dmarc: RecordState } } | null;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  createdAt: string;
  sending: { allowed: boolean; reason: string };
}

/** An event as the API lists it (GET /events, GET /events/contact/:id). */
export interface EventItem {
  id: string;
  name: string;
  contactId: string | null;
  email: string | null;
  data: Record<string, unknown>;
  createdAt: string;
}

export interface SendingEnv {
  env: TestEnv;
  dns: DnsServer;
  smtp: SmtpSink;
  /** verifiedDomain (below) on this environment. */
  verifiedDomain(project: ProjectWithKeys, domain: string): Promise<Domain>;
  /** Stops the environment (worker included), then the SMTP sink and the DNS server. */
  close(): Promise<void>;
}

/** Starts the DNS server, the SMTP sink, the environment (plus `extraEnv`) and its worker. */
export async function startSendingEnv(extraEnv: Record<string, string> = {}, opts: { clock?: Clock } = {}): Promise<SendingEnv> {
  const dns = await startDnsServer();
  const smtp = await startSmtpSink();
  let env: TestEnv | undefined;
  try {
    env = await startTestEnv({
      DNS_SERVERS: dns.address,
      SMTP_URL: smtp.url,
      DOMAIN_CHECK_INTERVAL_SECONDS: '1',
      SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
      ...extraEnv,
    }, opts);
    await env.startWorker();
  } catch (err) {
    // Whatever started would otherwise keep the test process alive.
    await env?.close();
    await smtp.close();
    await dns.close();
    throw err;
  }
  const started = env;

  return {
    env: started,
    dns,
    smtp,
    verifiedDomain: (project, domain) => verifiedDomain(started, dns, project, domain),
    async close() {
      // A test may have left DNS answers delayed; the worker's lookups must not hold up its shutdown.
      dns.delayMs = 0;
      await started.close();
      await smtp.close();
      await dns.close();
    },
  };
}

/**
 * Registers the domain for the project, publishes its records in the test DNS server, and waits
 * (no forced check) until the verification workflow has verified it. Returns it as then listed.
 */
export async function verifiedDomain(env: TestEnv, dns: DnsServer, project: ProjectWithKeys, domain: string): Promise<Domain> {
  const auth = bearer(project.secretKey);
  const res = await env.http().post('/domains').set(auth).send({ domain });
  expect(res.status).toBe(201);
  const added = res.body as Domain;
  for (const record of added.records) dns.set(record.name, 'TXT', [record.value]);
  return waitUntil(async () => {
    const list = await env.http().get(`/domains/project/${project.id}`).set(auth);
    expect(list.status).toBe(200);
    return (list.body as Domain[]).find((d) => d.id === added.id && d.status === 'verified');
  }, { timeoutMs: 30_000, what: `${domain} verified` });
}

/**
 * Resolves once no email that `where` selects (a condition on `emails`, `?` for `params`) waits
 * for delivery any more (QUEUED or SENDING): none is attempted again, and each one marked SENT was
 * accepted by the relay before the mark, so what the SMTP sink holds of them is all it will get.
 */
export async function deliveriesSettled(env: TestEnv, where: string, params: unknown[], timeoutMs = 30_000): Promise<void> {
  const pending = async () =>
    (await queryOne<{ n: number }>(env.orm.em.fork(), `select count(*)::int as n from emails where (${where}) and status in ('QUEUED','SENDING')`, params))!.n;
  let left = 0;
  await waitUntil(async () => (left = await pending()) === 0, { timeoutMs, what: () => `no email waiting for delivery (${left} still do)` });
}
