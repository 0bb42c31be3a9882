import { randomUUID } from 'node:crypto';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { Pool } from 'pg';
import { createOrm } from '../../db/orm';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { waitUntil } from '../helpers/sending';
import { type SmtpMessage, type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { type ApiRole, campaignBatchWorkers, createTopology, type PostgresTemporal, startPostgresTemporal, type Topology } from '../helpers/topology';

/**
 * The production topology: the service as 2 API processes and 2 worker processes (`tidings start
 * --api` / `--worker`, from source) on one database and one task queue, against a Temporal server
 * whose persistence and visibility are on PostgreSQL (deploy/temporal-postgres.sh, on free ports
 * with databases of its own), delivering to a real SMTP sink. Everything is done over HTTP, spread
 * across both APIs; the database and the Temporal server are only read, to wait and to check
 * (except by the start-up test, which sets up a database of its own).
 *
 * In order (later scenarios use what earlier ones made): the rate limit and Idempotency-Key as one
 * service across both APIs; a journey with a wait triggered through both; a CSV import of 5,000
 * contacts; a campaign to them shared by both workers, one of which is SIGKILLed mid-send; the
 * search attributes queried through the server. Last, two more API processes starting at once on
 * an empty database of their own (both migrate it at start).
 */
jest.setTimeout(120_000);

/** Per project and minute, for every API process (RATE_LIMIT_PER_MINUTE); low enough to reach here. */
const RATE_LIMIT = 200;
const CAMPAIGN_CONTACTS = 5000;
const JOURNEY_CONTACTS = 20;
const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[topology] ${msg}\n`);
const tag = Date.now().toString(36);

let temporalServer: PostgresTemporal | undefined;
let temporal: TemporalClient;
let connection: Connection | undefined;
let dns: DnsServer;
let smtp: SmtpSink;
let db: Pool;
let topo: Topology | undefined;
let api1: ApiRole;
let api2: ApiRole;
/** What the search-attribute test looks for, made by the scenarios before it. */
let journey: { project: Project; workflowId: string } | undefined;
let campaign: { project: Project; campaignId: string; importJob: string } | undefined;

interface Reply {
  status: number;
  headers: Headers;
  /** The JSON answer, read by the tests as they read supertest's `res.body`. */
  body: any;
}

/** One request to one API process; `key` is a project's secret key, `cookie` a session. */
async function call(
  api: ApiRole,
  method: string,
  path: string,
  opts: { body?: unknown; key?: string; cookie?: string; headers?: Record<string, string>; form?: FormData } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.cookie) headers.cookie = opts.cookie;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(api.url(path), {
    method,
    headers,
    body: opts.form ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // kept as text for the failure message
  }
  return { status: res.status, headers: res.headers, body };
}

async function expectStatus(reply: Promise<Reply>, status: number): Promise<Reply> {
  const r = await reply;
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${JSON.stringify(r.body)}\n${serverErrors()}`);
  return r;
}

/** What the service processes logged at error level (pino level 50 and up), for failure messages. */
const serverErrors = () =>
  (topo?.output() ?? '')
    .split('\n')
    .filter((line) => /"level":(50|60)/.test(line))
    .join('\n');

/** fn over every item, `n` at a time. */
async function inParallel<T>(n: number, items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let i = next++; i < items.length; i = next++) await fn(items[i]!);
    }),
  );
}

const rows = async <T>(sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows as T[];
const count = async (sql: string, params: unknown[] = []) => Number((await rows<{ n: string }>(sql, params))[0]!.n);

const recipientOf = (m: SmtpMessage) => m.envelope.to[0] ?? '';
const mailTo = (prefix: string) => smtp.messages.filter((m) => recipientOf(m).startsWith(prefix));
/** Recipient → how many messages it got, over the sink's messages to addresses starting with `prefix`. */
function perRecipient(prefix: string): Map<string, number> {
  const seen = new Map<string, number>();
  for (const m of mailTo(prefix)) seen.set(recipientOf(m), (seen.get(recipientOf(m)) ?? 0) + 1);
  return seen;
}
const twice = (seen: Map<string, number>) => [...seen].filter(([, n]) => n > 1);
/**
 * Resolves once no email that `where` selects waits for delivery (QUEUED or SENDING): none is
 * attempted again, and each SENT one reached the relay before its mark, so the sink holds all of them.
 */
const deliveriesSettled = (where: string, params: unknown[], timeoutMs = 30_000) =>
  waitUntil(async () => (await count(`select count(*) as n from emails where (${where}) and status in ('QUEUED','SENDING')`, params)) === 0, {
    timeoutMs,
    what: 'no email waiting for delivery',
  });

/** A project made over HTTP by the run's account, with a sending domain verified through DNS. */
interface Project {
  id: string;
  key: string;
  domain: string;
}

let cookie: string;

async function project(name: string, domain: string): Promise<Project> {
  const created = await expectStatus(call(api2, 'POST', '/users/@me/projects', { cookie, body: { name } }), 201);
  const p = { id: created.body.id as string, key: created.body.secretKey as string, domain };
  const added = await expectStatus(call(api1, 'POST', '/domains', { key: p.key, body: { domain } }), 201);
  for (const r of added.body.records as { name: string; value: string }[]) dns.set(r.name, 'TXT', [r.value]);
  const verified = await expectStatus(call(api2, 'GET', `/domains/${added.body.id}/verify`, { key: p.key }), 200);
  expect(verified.body.status).toBe('verified');
  return p;
}

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  // Few connections: the service's processes and the Temporal server share PostgreSQL's max_connections with it.
  db = new Pool({ connectionString: process.env.TEST_DATABASE_URL, max: 2 });
  temporalServer = await startPostgresTemporal({ log });
  connection = await Connection.connect({ address: temporalServer.address });
  temporal = new TemporalClient({ connection });
  topo = await createTopology({
    apis: 2,
    workers: 2,
    taskQueue: `topology-${randomUUID()}`,
    databaseUrl: process.env.TEST_DATABASE_URL!,
    temporalAddress: temporalServer.address,
    smtpUrl: smtp.url,
    dnsAddress: dns.address,
    env: {
      RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT),
      // The per-project campaign throttle (100/s by default) would make the campaign take a minute.
      SEND_THROTTLE_PER_SECOND: '100000',
      // Ten batches, so both workers run some and one can die between two of them.
      CAMPAIGN_BATCH_SIZE: '500',
      // A DELAY minute lasts 60 ms.
      JOURNEY_TIME_SCALE: '0.001',
      // A dead worker's claimed emails go back to the queue after this.
      DELIVERY_LEASE_SECONDS: '5',
    },
  });
  try {
    await topo.start();
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${topo.output()}`);
  }
  [api1, api2] = topo.apis as [ApiRole, ApiRole];
  const signup = await expectStatus(
    call(api1, 'POST', '/auth/signup', { body: { email: `owner-${tag}@accounts.test`, password: 'a long enough password' } }),
    201,
  );
  cookie = signup.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
}, 420_000);

afterAll(async () => {
  if (process.env.TEST_VERBOSE && topo) log(topo.output());
  await topo?.close();
  await connection?.close();
  await temporalServer?.stop();
  await smtp?.close();
  await dns?.close();
  await db?.end();
}, 120_000);

describe('two API processes are one service', () => {
  let p: Project;
  beforeAll(async () => {
    p = await project('topology idempotency', `idem-${tag}.test`);
  });

  test(`the rate limit (${RATE_LIMIT}/min) is counted once across both APIs, for /v1/send and /v1/track alike`, async () => {
    const r = await project('topology rate limit', `rate-${tag}.test`);
    // The window is the minute on the APIs' clock, this machine's as the database's: start early in one, so the whole burst falls in it.
    const second = async () => Number((await rows<{ s: string }>('select extract(second from now()) as s'))[0]!.s);
    if ((await second()) > 50) await waitUntil(async () => (await second()) < 50, 30_000);
    const window = `select coalesce(sum(count), 0) as n from rate_limit_windows where project_id = $1 and window_start = date_trunc('minute', now())`;
    const before = await count(window, [r.id]);

    const total = RATE_LIMIT + 100;
    const answers: { api: number; route: string; status: number | string; remaining: number }[] = [];
    // 8 clients; request i goes to API i%2, and alternates /v1/send and /v1/track per pair.
    await inParallel(8, Array.from({ length: total }, (_, i) => i), async (i) => {
      const api = i % 2 === 0 ? api1 : api2;
      const route = Math.floor(i / 2) % 2 === 0 ? '/v1/send' : '/v1/track';
      const body =
        route === '/v1/send'
          ? { to: `rate-${tag}-${i}@example.org`, from: `hi@${r.domain}`, subject: 'S', body: 'B' }
          : { email: `rate-${tag}-${i}@example.org`, event: 'burst' };
      const res = await call(api, 'POST', route, { key: r.key, body });
      const status = res.status === 200 || res.status === 429 ? res.status : `${res.status} ${JSON.stringify(res.body).slice(0, 300)}`;
      answers.push({ api: i % 2, route, status, remaining: Number(res.headers.get('ratelimit-remaining')) });
    });
    const after = await count(window, [r.id]);
    const odd = answers.filter((a) => typeof a.status === 'string');
    if (odd.length) throw new Error(`answers other than 200 and 429:\n${odd.map((a) => a.status).join('\n')}\n${serverErrors()}`);
    const ok = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    // One counter: each admitted request had its own place, whichever process answered it, and every
    // place the window had left went to one. A process may also hand out places it took before the
    // burst (api/middleware/rate-limit.ts), never one past the limit.
    const places = ok.map((a) => RATE_LIMIT - a.remaining).sort((a, b) => a - b);
    expect(new Set(places).size).toBe(places.length);
    expect(places.every((place) => place >= 1 && place <= RATE_LIMIT)).toBe(true);
    expect(places.filter((place) => place > before)).toEqual(Array.from({ length: RATE_LIMIT - before }, (_, i) => before + i + 1));
    // A refused request has a place too, past the limit, so every request was counted.
    expect(after).toBeGreaterThanOrEqual(RATE_LIMIT + limited.length);
    for (const api of [0, 1]) {
      for (const route of ['/v1/send', '/v1/track']) {
        expect(ok.some((a) => a.api === api && a.route === route)).toBe(true);
        expect(limited.some((a) => a.api === api && a.route === route)).toBe(true);
      }
    }
  });

  test('an Idempotency-Key used on API 1 then API 2, and on both at once, is processed once', async () => {
    const send = (api: ApiRole, key: string, to: string) =>
      call(api, 'POST', '/v1/send', {
        key: p.key,
        headers: { 'idempotency-key': key },
        body: { to, from: `hi@${p.domain}`, subject: 'Once', body: 'Once only' },
      });
    const track = (api: ApiRole, key: string, email: string) =>
      call(api, 'POST', '/v1/track', { key: p.key, headers: { 'idempotency-key': key }, body: { email, event: `idem-${tag}` } });
    // What the request did (replays come back from JSONB: same content, keys in another order).
    const idOf = (r: Reply) => JSON.stringify(r.body.data.emails?.map((e: { email: string }) => e.email) ?? r.body.data.event);

    const sequential = `idem-seq-${tag}@example.org`;
    const concurrent = `idem-par-${tag}@example.org`;
    const trackSeq = `idem-track-seq-${tag}@example.org`;
    const trackPar = `idem-track-par-${tag}@example.org`;
    for (const [fn, key, to] of [
      [send, `send-seq-${tag}`, sequential],
      [track, `track-seq-${tag}`, trackSeq],
    ] as const) {
      const first = await expectStatus(fn(api1, key, to), 200);
      const again = await expectStatus(fn(api2, key, to), 200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(idOf(again)).toBe(idOf(first));
    }
    for (const [fn, key, to] of [
      [send, `send-par-${tag}`, concurrent],
      [track, `track-par-${tag}`, trackPar],
    ] as const) {
      const answers = await Promise.all([api1, api2, api1, api2, api1, api2].map((api) => fn(api, key, to)));
      expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
      expect(new Set(answers.map(idOf)).size).toBe(1);
      expect(answers.filter((a) => a.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);
    }

    for (const to of [sequential, concurrent]) {
      expect(await count('select count(*) as n from emails where project_id = $1 and to_email = $2', [p.id, to])).toBe(1);
    }
    const events = await rows<{ email: string; n: string }>(
      `select c.email, count(*) as n from events e join contacts c on c.id = e.contact_id
        where e.project_id = $1 and e.name = $2 group by c.email order by c.email`,
      [p.id, `idem-${tag}`],
    );
    expect(events.map((e) => [e.email, Number(e.n)])).toEqual([
      [trackPar, 1],
      [trackSeq, 1],
    ]);
    await waitUntil(async () => mailTo(sequential).length + mailTo(concurrent).length >= 2, 30_000);
    await deliveriesSettled('project_id = $1 and to_email = any($2)', [p.id, [sequential, concurrent]]);
    expect(mailTo(`idem-seq-${tag}`)).toHaveLength(1);
    expect(mailTo(`idem-par-${tag}`)).toHaveLength(1);
  });
});

describe('a journey with a wait, triggered through both APIs', () => {
  test(`${JOURNEY_CONTACTS} contacts, each tracked on both APIs: one execution each, each email exactly once`, async () => {
    const j = await project('topology journeys', `journey-${tag}.test`);
    const key = j.key;
    const template = await expectStatus(
      call(api1, 'POST', '/templates', {
        key,
        body: { name: 'welcome', subject: 'Welcome', body: '<p>Hi {{email}}</p>', from: `hi@${j.domain}`, type: 'TRANSACTIONAL' },
      }),
      201,
    );
    const signup = `signup-${tag}`;
    const paid = `paid-${tag}`;
    const wf = await expectStatus(call(api2, 'POST', '/workflows', { key, body: { name: 'welcome', eventName: signup } }), 201);
    const wfId = wf.body.id as string;
    const trigger = (wf.body.steps as { id: string; type: string }[]).find((s) => s.type === 'TRIGGER')!.id;
    const step = async (type: string, config: Record<string, unknown>) =>
      (await expectStatus(call(api1, 'POST', `/workflows/${wfId}/steps`, { key, body: { type, config } }), 201)).body.id as string;
    const wait = await step('WAIT_FOR_EVENT', { eventName: paid });
    const delay = await step('DELAY', { amount: 10, unit: 'minutes' }); // 600 ms at JOURNEY_TIME_SCALE 0.001
    const mail = await step('SEND_EMAIL', { templateId: template.body.id });
    for (const [from, to] of [
      [trigger, wait],
      [wait, delay],
      [delay, mail],
    ]) {
      await expectStatus(call(api2, 'POST', `/workflows/${wfId}/transitions`, { key, body: { fromStepId: from, toStepId: to } }), 201);
    }
    await expectStatus(call(api1, 'PATCH', `/workflows/${wfId}`, { key, body: { enabled: true } }), 200);

    const contacts = Array.from({ length: JOURNEY_CONTACTS }, (_, i) => `journey-${tag}-${i}@example.org`);
    // Both APIs at once for each contact, a few contacts at a time (each process's pool is 20 connections).
    const trackAll = (event: string) =>
      inParallel(4, contacts, (email) =>
        Promise.all([api1, api2].map((api) => expectStatus(call(api, 'POST', '/v1/track', { key, body: { email, event } }), 200))),
      );
    // Every contact enters through both APIs at once; without re-entry it enters once.
    await trackAll(signup);
    const executions = () =>
      rows<{ email: string; status: string; waiting_for_event: string | null }>(
        `select c.email, x.status, x.waiting_for_event from workflow_executions x join contacts c on c.id = x.contact_id where x.workflow_id = $1`,
        [wfId],
      );
    // What the executions were at the last look, for the error if they never get there.
    let seen: Awaited<ReturnType<typeof executions>> = [];
    const states = () => {
      const counts = new Map<string, number>();
      for (const x of seen) {
        const state = x.waiting_for_event ? `${x.status} for ${x.waiting_for_event}` : x.status;
        counts.set(state, (counts.get(state) ?? 0) + 1);
      }
      return `seen ${seen.length}: ${[...counts].map(([state, n]) => `${n} ${state}`).join(', ') || 'none'}\n${serverErrors()}`;
    };
    await waitUntil(
      async () => {
        seen = await executions();
        return seen.length === contacts.length && seen.every((x) => x.status === 'WAITING' && x.waiting_for_event === paid);
      },
      { timeoutMs: 60_000, what: () => `${contacts.length} executions WAITING for ${paid}; ${states()}` },
    );
    // The event they wait for, also through both.
    await trackAll(paid);
    await waitUntil(
      async () => {
        seen = await executions();
        return seen.every((x) => x.status === 'COMPLETED');
      },
      { timeoutMs: 60_000, what: () => `every execution COMPLETED; ${states()}` },
    );
    await waitUntil(async () => mailTo(`journey-${tag}-`).length >= contacts.length, 90_000);
    await deliveriesSettled('project_id = $1', [j.id]);
    const received = perRecipient(`journey-${tag}-`);
    expect(twice(received)).toEqual([]);
    expect([...received.keys()].sort()).toEqual([...contacts].sort());
    expect(await executions()).toHaveLength(contacts.length);
    journey = { project: j, workflowId: wfId };
  });
});

describe('a campaign to 5,000 contacts across two workers', () => {
  let c: Project;
  let importJob: string;
  const contact = (i: number) => `cmp-${tag}-${i}@example.org`;

  test(`a CSV import of ${CAMPAIGN_CONTACTS} rows through API 1 completes with every row`, async () => {
    c = await project('topology campaign', `campaign-${tag}.test`);
    const csv = ['email,first,n', ...Array.from({ length: CAMPAIGN_CONTACTS }, (_, i) => `${contact(i)},Name${i},${i}`)].join('\n');
    const form = new FormData();
    form.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
    const upload = await expectStatus(call(api1, 'POST', '/contacts/import', { key: c.key, form }), 202);
    importJob = upload.body.jobId as string;
    const job = await waitUntil(
      async () => {
        const r = await call(api1, 'GET', `/contacts/import/${importJob}`, { key: c.key });
        return ['completed', 'failed'].includes(r.body.status) && r.body;
      },
      // Seldom: this project's requests count against the rate limit.
      { timeoutMs: 90_000, intervalMs: 1_000, what: 'the import job to end' },
    );
    expect(job).toMatchObject({ status: 'completed', totalRows: CAMPAIGN_CONTACTS, processedRows: CAMPAIGN_CONTACTS, imported: CAMPAIGN_CONTACTS, errors: [] });
    expect(await count('select count(*) as n from contacts where project_id = $1 and subscribed', [c.id])).toBe(CAMPAIGN_CONTACTS);
  });

  test('sent through API 2, shared by both workers, one SIGKILLed mid-send: every contact exactly once', async () => {
    expect(importJob).toBeDefined();
    const created = await expectStatus(
      call(api2, 'POST', '/campaigns', {
        key: c.key,
        body: { name: 'Topology', subject: 'Hello {{first}}', body: '<p>Number {{n}}</p>', from: `news@${c.domain}` },
      }),
      201,
    );
    const campaignId = created.body.id as string;
    await expectStatus(call(api2, 'POST', `/campaigns/${campaignId}/send`, { key: c.key, body: {} }), 200);
    const workflowId = `campaign:${campaignId}`;
    await waitUntil(async () => mailTo(`cmp-${tag}-`).length >= CAMPAIGN_CONTACTS / 5, 60_000);

    // The relay stops accepting; once every accepted message is recorded SENT, no email is in
    // SMTP's own gap (taken by the relay, not yet marked), so a kill now must cost no duplicate.
    await smtp.stop();
    const sentRows = () => count('select count(*) as n from emails where campaign_id = $1 and sent_at is not null', [campaignId]);
    await waitUntil(async () => (await sentRows()) === mailTo(`cmp-${tag}-`).length, 30_000);
    const before = mailTo(`cmp-${tag}-`).length;
    expect(before).toBeLessThan(CAMPAIGN_CONTACTS);
    // The worker that sent the last finished batch dies; the other has to do the rest.
    const batches = await campaignBatchWorkers(temporal, workflowId);
    const victim = topo!.workerOf(batches[batches.length - 1] ?? '');
    if (!victim) throw new Error(`no batch run by a worker of this topology yet: ${JSON.stringify(batches)}`);
    const survivor = topo!.workers.find((w) => w !== victim)!;
    const victimPid = victim.pid()!;
    const survivorPid = survivor.pid()!;
    await victim.kill();
    log(`${victim.name} (pid ${victimPid}) SIGKILLed with ${before} of ${CAMPAIGN_CONTACTS} sent`);
    await smtp.restart();

    await waitUntil(async () => (await rows<{ status: string }>('select status from campaigns where id = $1', [campaignId]))[0]?.status === 'SENT', 120_000);
    // The workflow has closed (no batch can send any more) and no email of it waits for delivery.
    await temporal.workflow.getHandle(workflowId).result();
    await deliveriesSettled('campaign_id = $1', [campaignId]);
    const seen = perRecipient(`cmp-${tag}-`);
    expect(twice(seen)).toEqual([]);
    expect(seen.size).toBe(CAMPAIGN_CONTACTS);
    for (let i = 0; i < CAMPAIGN_CONTACTS; i += 499) expect(seen.get(contact(i))).toBe(1);
    expect(await rows('select status, count(*)::int as n from emails where campaign_id = $1 group by status', [campaignId])).toEqual([
      { status: 'SENT', n: CAMPAIGN_CONTACTS },
    ]);
    // Both took part: batches were run by the killed worker before the kill and by the survivor after.
    const pids = new Set((await campaignBatchWorkers(temporal, workflowId)).map((identity) => Number(/^(\d+)@/.exec(identity)?.[1])));
    expect([...pids].sort()).toEqual([victimPid, survivorPid].sort());
    campaign = { project: c, campaignId, importJob };
  });
});

describe('search attributes on the PostgreSQL visibility store', () => {
  const list = async (query: string) => {
    const ids: string[] = [];
    for await (const w of temporal.workflow.list({ query })) ids.push(w.workflowId);
    return ids.sort();
  };

  test('ProjectId, CampaignId and TidingsWorkflowId find the executions', async () => {
    expect(campaign).toBeDefined();
    expect(journey).toBeDefined();
    const { project: c, campaignId, importJob } = campaign!;
    // Visibility is written after the fact: wait until the closed campaign shows.
    const ofCampaignProject = await waitUntil(async () => {
      const ids = await list(`ProjectId = "${c.id}"`);
      return ids.includes(`campaign:${campaignId}`) && ids.includes(`contact-import:${importJob}`) ? ids : undefined;
    }, 30_000);
    expect(ofCampaignProject.every((id) => /^(campaign|contact-import|domain-verification):/.test(id))).toBe(true);
    expect(new Set(await list(`CampaignId = "${campaignId}"`))).toEqual(new Set([`campaign:${campaignId}`]));

    const { project: j, workflowId } = journey!;
    const executions = await rows<{ id: string }>('select id from workflow_executions where workflow_id = $1', [workflowId]);
    const journeys = await waitUntil(async () => {
      const ids = await list(`ProjectId = "${j.id}" AND TidingsWorkflowId = "${workflowId}"`);
      return ids.length === executions.length ? ids : undefined;
    }, 30_000);
    expect(journeys).toEqual(executions.map((x) => `journey:${x.id}`).sort());
    expect(await list(`ProjectId = "${j.id}" AND TidingsWorkflowId = "${workflowId}" AND ExecutionStatus = "Running"`)).toEqual([]);
  });
});

describe('start-up', () => {
  test('two API processes started at once on a database with pending migrations both come up', async () => {
    // An empty database of its own, with only the migrator's bookkeeping table, which the test
    // holds locked while both processes start: each then reads the list of applied migrations at
    // the same moment, as two replicas started together may.
    const admin = new URL(process.env.TEST_DATABASE_URL!);
    admin.pathname = '/postgres';
    const name = `tidings_topo_fresh_${Date.now()}`;
    const adminDb = new Pool({ connectionString: admin.toString(), max: 1 });
    await adminDb.query(`create database ${name}`);
    const url = new URL(admin.toString());
    url.pathname = `/${name}`;
    const orm = await createOrm(url.toString());
    await orm.getMigrator().getExecutedMigrations(); // creates the (empty) table
    await orm.close();
    const holder = new Pool({ connectionString: url.toString(), max: 1 });
    const lock = await holder.connect();
    await lock.query('begin');
    await lock.query('lock table mikro_orm_migrations in access exclusive mode');
    const fresh = await createTopology({
      apis: 2,
      workers: 0,
      taskQueue: `topology-fresh-${randomUUID()}`,
      databaseUrl: url.toString(),
      temporalAddress: temporalServer!.address,
      smtpUrl: smtp.url,
      dnsAddress: dns.address,
    });
    try {
      const started = fresh.apis.map((a) => a.start());
      const settled = Promise.allSettled(started);
      const waiting = () =>
        count(`select count(distinct l.pid) as n from pg_locks l join pg_stat_activity a on a.pid = l.pid where not l.granted and a.datname = $1`, [name]);
      await waitUntil(async () => (await waiting()) >= 2 || fresh.apis.some((a) => !a.running()), 90_000);
      await lock.query('commit');
      const failed = (await settled).flatMap((r, i) => (r.status === 'rejected' ? [`${fresh.apis[i]!.name}: ${String(r.reason).slice(0, 1500)}`] : []));
      expect(failed).toEqual([]);
    } finally {
      await lock.query('rollback').catch(() => undefined);
      lock.release();
      await holder.end();
      await fresh.close();
      await adminDb.query(`drop database if exists ${name} with (force)`);
      await adminDb.end();
    }
  });
});
