/**
 * Throughput with 1 and then 2 worker processes: the production topology (docs/production.md) with the API
 * as its own process, against a Temporal server whose persistence and visibility are on PostgreSQL.
 *
 *   npx tsx bench/topology.ts [--campaign 5000] [--send 2000] [--concurrency 16]
 *
 * Set-up, torn down again however the run ends:
 *  - a fresh database on BENCH_POSTGRES_ADMIN_URL's server (bench/harness.ts freshDatabase), migrated;
 *  - Temporal on PostgreSQL through deploy/temporal-postgres.sh (test/helpers/topology.ts
 *    startPostgresTemporal: free ports, databases of its own, dropped at the end);
 *  - the test DNS server and SMTP sink in this process;
 *  - `tidings start --api` and `tidings start --worker` from source as child processes
 *    (test/helpers/topology.ts), NODE_ENV=production, LOG_LEVEL=warn, RATE_LIMIT_PER_MINUTE and
 *    SEND_THROTTLE_PER_SECOND raised so neither limits the figures.
 *
 * A warm-up round with one worker process, left out of the figures (the processes compile their
 * code on it), then two measured rounds, the first with one worker, the second after a second one
 * joined the same task queue. Each round has a project of its own, with a verified domain
 * (DKIM-signed mail), and runs:
 *  1. a campaign to --campaign contacts (inserted set-based): emails/s from the send request to the
 *     last message at the sink;
 *  2. --send emails through POST /v1/send, one recipient each, --concurrency keep-alive clients:
 *     accepted/s up to the last 200, delivered/s from the first request to the last message.
 * Each is checked exactly once by recipient. The output also gives each worker's CPU time per
 * round and which worker ran the campaign's batches (from the Temporal history): a second worker
 * that takes no work, or a figure that does not move, says where the engine serialises. On 2
 * cores a second worker cannot double anything: it competes for the same cores with the API,
 * PostgreSQL, Temporal and this process. A worker that joins gets delivery-engine rounds as the
 * running ones end (within a minute, docs/delivery.md), so the second round's `/v1/send` may be
 * the first worker's alone; campaign batches are shared at once.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { createOrm, migrate, type Orm } from '../db/orm';
import { newId } from '../db/ids';
import { createProject } from '../db/projects/projects';
import { query, queryOne } from '../db/sql';
import { startDnsServer } from '../test/helpers/dns';
import { startSmtpSink, type SmtpSink } from '../test/helpers/smtp';
import { campaignBatchWorkers, createTopology, startPostgresTemporal, type Topology } from '../test/helpers/topology';
import { BENCH_RATE_LIMIT, cpuSecondsOf, freshDatabase, type Interruption, runBench, Teardown, verifiedDomain } from './harness';
import { closedLoop, environmentLine, jsonClient, log, positiveInt, RequestTally } from './support';

const SUBJECT = 'News for {{first ?? "you"}}';
const BODY = '<p>Hello {{first ?? "there"}}, number {{n}}.</p><p><a href="https://example.org/read?id={{n}}">Read more</a></p>';

function options() {
  const { values } = parseArgs({
    options: {
      campaign: { type: 'string', default: '5000' },
      send: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '16' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/topology.ts [--campaign 5000] [--send 2000] [--concurrency 16]\n');
    process.exit(0);
  }
  return {
    campaign: positiveInt('campaign', values.campaign),
    send: positiveInt('send', values.send),
    concurrency: positiveInt('concurrency', values.concurrency),
  };
}

interface Round {
  workers: number;
  campaignRate: number;
  acceptedRate: number;
  deliveredRate: number;
  /** Campaign batches run by each worker process (by its name). */
  batches: Map<string, number>;
  /** CPU seconds each worker process used during the round. */
  workerCpu: Map<string, number>;
  apiCpu: number;
  problems: string[];
}

interface Context {
  orm: Orm;
  sink: SmtpSink;
  dnsServer: Awaited<ReturnType<typeof startDnsServer>>;
  topo: Topology;
  temporal: TemporalClient;
  opts: ReturnType<typeof options>;
  stop: Interruption;
  teardown: Teardown;
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const db = await freshDatabase(teardown);
  stop.checkpoint();
  const orm = await createOrm(db.url);
  teardown.add(() => orm.close());
  await migrate(orm);
  log(`database ${db.name} created and migrated`);
  stop.checkpoint();
  const temporalServer = await startPostgresTemporal({ log });
  teardown.add(() => temporalServer.stop());
  log(`Temporal on PostgreSQL at ${temporalServer.address} (databases ${temporalServer.database}, ${temporalServer.database}_visibility)`);
  stop.checkpoint();
  const connection = await Connection.connect({ address: temporalServer.address });
  teardown.add(() => connection.close());
  const temporal = new TemporalClient({ connection });
  const dnsServer = await startDnsServer();
  teardown.add(() => dnsServer.close());
  const sink = await startSmtpSink();
  teardown.add(() => sink.close());

  const topo = await createTopology({
    apis: 1,
    workers: 2,
    taskQueue: 'tidings',
    databaseUrl: db.url,
    temporalAddress: temporalServer.address,
    smtpUrl: sink.url,
    dnsAddress: dnsServer.address,
    env: {
      NODE_ENV: 'production',
      RATE_LIMIT_PER_MINUTE: String(BENCH_RATE_LIMIT),
      SEND_THROTTLE_PER_SECOND: String(BENCH_RATE_LIMIT),
    },
  });
  teardown.add(() => topo.close());
  const [api, first, second] = [topo.apis[0]!, topo.workers[0]!, topo.workers[1]!];
  const started = async (what: Promise<void>) => {
    try {
      await what;
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${topo.output()}`);
    }
  };
  await started(Promise.all([api.start(), first.start()]).then(() => undefined));
  log(`API (pid ${api.pid()}) on port ${api.port}, ${first.name} (pid ${first.pid()}) polling`);
  stop.checkpoint();

  const ctx: Context = { orm, sink, dnsServer, topo, temporal, opts, stop, teardown };
  // Unmeasured: the processes compile their code on it, so that the two rounds compare workers, not warmth.
  const warmUp = await round(ctx, 1, 'warm-up');
  stop.checkpoint();
  const loadBefore = os.loadavg()[0]!;
  const one = await round(ctx, 1);
  stop.checkpoint();
  await started(second.start());
  log(`${second.name} (pid ${second.pid()}) polling`);
  const two = await round(ctx, 2);
  const loadAfter = os.loadavg()[0]!;

  const ratio = (a: number, b: number) => (b / a).toFixed(2);
  const f = (v: number) => v.toFixed(0).padStart(6);
  const problems = [...warmUp.problems, ...one.problems, ...two.problems];
  const describe = (r: Round) =>
    `${r.workers} worker(s): campaign batches ${[...r.batches].map(([w, n]) => `${w} ${n}`).join(', ') || 'none'}; ` +
    `CPU-s ${[...r.workerCpu].map(([w, s]) => `${w} ${s.toFixed(1)}`).join(', ')}, api ${r.apiCpu.toFixed(1)}`;
  const lines = [
    '',
    `Tidings topology bench: Temporal on PostgreSQL (deploy/temporal-postgres.sh), the API and each worker as its own process (tidings start --api / --worker)`,
    `  environment   ${environmentLine(db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after (1-minute). Other work on the machine (other sessions' tests and builds) makes these figures noisy`,
    `  sizes         campaign to ${opts.campaign} contacts (batches of 500, one workflow); ${opts.send} × POST /v1/send with 1 recipient, ${opts.concurrency} keep-alive clients`,
    `                             1 worker   2 workers   2 / 1`,
    `  campaign      emails/s      ${f(one.campaignRate)}      ${f(two.campaignRate)}      ${ratio(one.campaignRate, two.campaignRate)}   (send request → last message at the sink)`,
    `  /v1/send      accepted/s    ${f(one.acceptedRate)}      ${f(two.acceptedRate)}      ${ratio(one.acceptedRate, two.acceptedRate)}   (until the last 200)`,
    `                delivered/s   ${f(one.deliveredRate)}      ${f(two.deliveredRate)}      ${ratio(one.deliveredRate, two.deliveredRate)}   (first request → last message at the sink)`,
    `  work split    ${describe(one)}`,
    `                ${describe(two)}`,
    `  check         ${problems.length ? `FAILED: ${problems.join('; ')}` : 'OK: every campaign contact and every accepted email at the sink exactly once, campaigns SENT'}`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  if (problems.length) process.exitCode = 1;
}

/** One round on the workers running now: a project of its own (named `name`), the campaign, then the /v1/send load. */
async function round(ctx: Context, workers: number, name = String(workers)): Promise<Round> {
  const { orm, sink, topo, opts, stop } = ctx;
  const api = topo.apis[0]!;
  const problems: string[] = [];
  const what = name === String(workers) ? `${workers} worker(s)` : `${name}, ${workers} worker(s)`;
  const project = await createProject(orm.em.fork(), `bench topology ${name}`);
  const client = jsonClient(api.port, project.secretKey, opts.concurrency);
  ctx.teardown.add(async () => client.close());
  const domain = `topology-${name}.bench.test`;
  await verifiedDomain({ client, dnsServer: ctx.dnsServer }, domain);
  const running = topo.workers.filter((w) => w.running());
  const cpu = () => new Map([...running, api].map((r) => [r.name, cpuSecondsOf(r.pid()!) ?? NaN]));
  const cpuBefore = cpu();

  // ---- the campaign ----
  const prefix = `c${name}-`;
  await seedContacts(orm, project.id, prefix, opts.campaign);
  stop.checkpoint();
  const created = await client.request('POST', '/campaigns', { name: 'Bench', subject: SUBJECT, body: BODY, from: `news@${domain}` });
  if (created.status !== 201) throw new Error(`POST /campaigns: ${created.status} ${created.text}`);
  const campaignId = (created.body as { id: string }).id;
  sink.clear();
  const campaignStart = Date.now();
  const sent = await client.request('POST', `/campaigns/${campaignId}/send`, {});
  if (sent.status !== 200) throw new Error(`POST /campaigns/:id/send: ${sent.status} ${sent.text}`);
  await untilAtSink(ctx, opts.campaign, `${what}, campaign`);
  const campaignRate = opts.campaign / ((lastArrival(sink) - campaignStart) / 1000);
  problems.push(...exactlyOnce(sink, opts.campaign, `campaign (${what})`));
  const status = async () => (await queryOne<{ status: string }>(orm.em.fork(), 'select status from campaigns where id = ?', [campaignId]))?.status;
  for (const deadline = Date.now() + 30_000; (await status()) !== 'SENT' && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 200));
  if ((await status()) !== 'SENT') problems.push(`campaign (${what}) is ${await status()}, not SENT`);
  const batches = await batchesByWorker(ctx, `campaign:${campaignId}`);
  log(`${what}: campaign ${campaignRate.toFixed(0)} emails/s`);
  stop.checkpoint();

  // ---- the /v1/send load ----
  sink.clear();
  const tally = new RequestTally(opts.send);
  let accepted = 0;
  let lastOk = 0;
  const loadStart = Date.now();
  const t0 = performance.now();
  await closedLoop(opts.send, opts.concurrency, async (i) => {
    if (stop.interrupted) return;
    const res = await tally.request(() =>
      client.request('POST', '/v1/send', {
        to: { name: `User ${i}`, email: `s${name}-${i}@bench.example.org` },
        from: { name: 'Bench', email: `orders@${domain}` },
        subject: 'Your order {{order}} has shipped',
        body: '<p>Hi {{name ?? "there"}}, order {{order}} is on its way.</p>',
        data: { order: { value: `#${i}`, persistent: false } },
      }),
    );
    if (res) {
      accepted++;
      lastOk = performance.now();
    }
  });
  const acceptedRate = accepted / ((lastOk - t0) / 1000);
  if (accepted !== opts.send) problems.push(`${opts.send - accepted} /v1/send requests failed (${what})${tally.errorDetail()}`);
  await untilAtSink(ctx, accepted, `${what}, /v1/send`);
  const deliveredRate = accepted / ((lastArrival(sink) - loadStart) / 1000);
  problems.push(...exactlyOnce(sink, accepted, `/v1/send (${what})`));
  log(`${what}: /v1/send ${acceptedRate.toFixed(0)} accepted/s, ${deliveredRate.toFixed(0)} delivered/s`);

  const cpuAfter = cpu();
  const used = (name: string) => cpuAfter.get(name)! - cpuBefore.get(name)!;
  return {
    workers,
    campaignRate,
    acceptedRate,
    deliveredRate,
    batches,
    workerCpu: new Map(running.map((w) => [w.name, used(w.name)])),
    apiCpu: used(api.name),
    problems,
  };
}

/** `n` subscribed contacts `<prefix><i>@bench.example.org` with two data fields, 10,000 per statement. */
async function seedContacts(orm: Orm, projectId: string, prefix: string, n: number): Promise<void> {
  for (let from = 0; from < n; from += 10_000) {
    const rows = [];
    for (let i = from; i < Math.min(n, from + 10_000); i++) rows.push({ id: newId('cnt'), email: `${prefix}${i}@bench.example.org`, data: { first: `User${i}`, n: i } });
    await query(
      orm.em.fork(),
      `insert into contacts (id, project_id, email, subscribed, data)
       select id, ?, email, true, data from jsonb_to_recordset(?::jsonb) as r(id text, email text, data jsonb)`,
      [projectId, JSON.stringify(rows)],
    );
  }
}

/** Until the sink holds `n` messages; fails when nothing arrives for a minute. */
async function untilAtSink(ctx: Context, n: number, what: string): Promise<void> {
  let last = -1;
  let lastProgress = Date.now();
  while (ctx.sink.messages.length < n) {
    ctx.stop.checkpoint();
    if (ctx.sink.messages.length !== last) [last, lastProgress] = [ctx.sink.messages.length, Date.now()];
    if (Date.now() - lastProgress > 60_000) throw new Error(`${what}: ${last} of ${n} messages at the sink, none for a minute\n${ctx.topo.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const lastArrival = (sink: SmtpSink) => Math.max(...sink.messages.map((m) => m.receivedAt.getTime()));

function exactlyOnce(sink: SmtpSink, n: number, what: string): string[] {
  const seen = new Map<string, number>();
  for (const m of sink.messages) seen.set(m.envelope.to[0] ?? '', (seen.get(m.envelope.to[0] ?? '') ?? 0) + 1);
  const twice = [...seen.values()].filter((c) => c > 1).length;
  return seen.size === n && twice === 0 ? [] : [`${what}: ${seen.size} of ${n} recipients at the sink, ${twice} more than once`];
}

/** Completed campaign batches per worker process. */
async function batchesByWorker(ctx: Context, workflowId: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const identity of await campaignBatchWorkers(ctx.temporal, workflowId)) {
    const name = ctx.topo.workerOf(identity)?.name ?? identity;
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return counts;
}

runBench(main);
