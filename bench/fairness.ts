/**
 * Fairness across projects: with a backlog of project A's emails queued (20,000 by default), how
 * long a single POST /v1/send of project B takes from the request to its arrival at the relay.
 *
 *   npx tsx bench/fairness.ts [--topology start|split] [--backlog 20000] [--sends 50] [--relay-delay-ms 0]
 *
 * It sets everything up on loopback itself and tears it down again:
 *  - a fresh database (bench/harness.ts freshDatabase), migrated; an in-memory Temporal dev server;
 *  - the test DNS server and SMTP sink in this process, the relay every email goes to;
 *  - the service as a deployment runs it (bench/harness.ts startServices), the build
 *    (`dist/cli/main.js`, built here first; BENCH_SERVICE_FROM_SOURCE=1 runs the source through
 *    tsx), NODE_ENV=production: with `--topology start`, `tidings start` (the API and the worker
 *    under its supervision); with `--topology split`, `tidings start --api` and `tidings start --worker`;
 *  - projects A and B, each with a verified domain (DKIM-signed mail).
 *
 * Phases:
 *  0. a warm-up: --warm-up single sends of each project, then ANALYZE;
 *  1. idle: --sends single sends of B, one after the other (each once the last one arrived), timed
 *     from the request to the message's arrival at the sink: the reference;
 *  2. the backlog: --backlog emails of A written QUEUED in one statement, first on a queue no
 *     engine serves, where EXPLAIN ANALYZE reads the engine's claim over them (db/messages/
 *     delivery-queue.ts claimStatement, rolled back), then moved to the service's queue at once;
 *  3. under the backlog: --sends single sends of B as in 1, each with how much of A's backlog
 *     had not reached the sink yet when B's email did;
 *  4. until A's backlog is at the sink: its rate, and every email of A and B there exactly once.
 * --relay-delay-ms slows the sink's answer to each message, for a backlog that lasts longer.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { createOrm, migrate, type Orm } from '../db/orm';
import { claimStatement } from '../db/messages/delivery-queue';
import { createProject, type ProjectWithKeys } from '../db/projects/projects';
import { query, queryOne } from '../db/sql';
import { startDnsServer, type DnsServer } from '../test/helpers/dns';
import { type SmtpSink, startSmtpSink } from '../test/helpers/smtp';
import { BENCH_RATE_LIMIT, devTemporal, freshDatabase, type Interruption, runBench, SERVICE_CODE, startServices, type Teardown, verifiedDomain } from './harness';
import { closedLoop, environmentLine, jsonClient, log, percentile, positiveInt } from './support';
import { emailsKey, OUTBOX_CHANNEL } from '../temporal/wakeups';

const TASK_QUEUE = 'tidings';
/** A queue no engine serves: the backlog is written there first, where the claim's plan is read. */
const PLAN_QUEUE = 'fairness-plan';
/** What the engine's claim asks for at a time (temporal/delivery/activities.ts: DELIVERY_CONCURRENCY × 4). */
const CLAIM_LIMIT = 64;

function options() {
  const { values } = parseArgs({
    options: {
      topology: { type: 'string', default: 'start' },
      backlog: { type: 'string', default: '20000' },
      sends: { type: 'string', default: '50' },
      'warm-up': { type: 'string', default: '300' },
      'relay-delay-ms': { type: 'string', default: '0' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/fairness.ts [--topology start|split] [--backlog 20000] [--sends 50] [--warm-up 300] [--relay-delay-ms 0]\n');
    process.exit(0);
  }
  if (values.topology !== 'start' && values.topology !== 'split') throw new Error(`--topology must be start or split, not ${values.topology}`);
  const relayDelayMs = Number(values['relay-delay-ms']);
  if (!(relayDelayMs >= 0)) throw new Error(`--relay-delay-ms must be 0 or more, got ${values['relay-delay-ms']}`);
  return {
    topology: values.topology as 'start' | 'split',
    backlog: positiveInt('backlog', values.backlog),
    sends: positiveInt('sends', values.sends),
    warmUp: positiveInt('warm-up', values['warm-up']),
    relayDelayMs,
  };
}

interface Sender {
  project: ProjectWithKeys;
  domain: string;
  client: ReturnType<typeof jsonClient>;
}

/** One send of `sender` to `to`, timed from the request to its arrival at the sink (ms); undefined if it never came. */
async function timedSend(sink: SmtpSink, sender: Sender, to: string): Promise<number | undefined> {
  const from = sink.messages.length;
  const requestedAt = Date.now();
  const res = await sender.client.request('POST', '/v1/send', { to, from: `news@${sender.domain}`, subject: 'Hello', body: '<p>Hi {{email}}</p>' });
  if (res.status !== 200) throw new Error(`POST /v1/send: ${res.status} ${res.text}`);
  const deadline = Date.now() + 60_000;
  for (let scanned = from; ; ) {
    for (; scanned < sink.messages.length; scanned++) {
      const m = sink.messages[scanned]!;
      if (m.envelope.to.includes(to)) return m.receivedAt.getTime() - requestedAt;
    }
    const left = deadline - Date.now();
    if (left <= 0) return undefined;
    await sink.waitFor(scanned + 1, left).catch(() => undefined);
  }
}

/** Sends one at a time, each once the last one arrived; also what `during` says at each arrival. */
async function singles<T>(sink: SmtpSink, sender: Sender, n: number, tag: string, stop: Interruption, during: () => T) {
  const latencies: number[] = [];
  const seen: T[] = [];
  let lost = 0;
  for (let k = 0; k < n && !stop.interrupted; k++) {
    const ms = await timedSend(sink, sender, `${tag}-${k}@b.example.org`);
    if (ms === undefined) lost++;
    else latencies.push(ms);
    seen.push(during());
  }
  return { latencies, seen, lost };
}

const figures = (ms: number[]) => {
  const sorted = Float64Array.from(ms).sort();
  return `p50 ${percentile(sorted, 50).toFixed(0)} ms, p99 ${percentile(sorted, 99).toFixed(0)} ms, max ${sorted[sorted.length - 1]?.toFixed(0)} ms (${ms.length} sends)`;
};

/** A's backlog, written QUEUED on PLAN_QUEUE in one statement: rendered rows as /v1/send writes them, oldest first. */
async function writeBacklog(orm: Orm, a: Sender, n: number): Promise<void> {
  const domain = await queryOne<{ id: string }>(orm.em.fork(), 'select id from domains where project_id = ?', [a.project.id]);
  await query(
    orm.em.fork(),
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, queue, domain_id, created_at)
     select gen_random_uuid(), ?, 'transactional', 'backlog-' || i || '@a.example.org', ?, 'Your order has shipped',
            '<p>Hi backlog-' || i || '@a.example.org, your order is on its way.</p>', 'QUEUED', ?, ?,
            clock_timestamp() - interval '1 minute' + make_interval(secs => i / 1000.0)
     from generate_series(1, ?) i`,
    [a.project.id, `news@${a.domain}`, PLAN_QUEUE, domain!.id, n],
  );
}

/** EXPLAIN ANALYZE of the engine's claim over the backlog, rolled back: its time and the indexes it read. */
async function claimPlan(orm: Orm): Promise<{ executionMs: number; planningMs: number; indexes: string[] }> {
  const { sql, params } = claimStatement(PLAN_QUEUE, CLAIM_LIMIT, 60, 'queued');
  const em = orm.em.fork();
  let plan: string[] = [];
  await em
    .transactional(async (tx) => {
      const rows = await query<{ 'QUERY PLAN': string }>(tx, `explain (analyze, buffers) ${sql}`, params);
      plan = rows.map((r) => r['QUERY PLAN']);
      throw new Error('rollback');
    })
    .catch((err: Error) => {
      if (err.message !== 'rollback') throw err;
    });
  const ms = (label: string) => Number(new RegExp(`${label} Time: ([\\d.]+) ms`).exec(plan.join('\n'))?.[1]);
  const indexes = [...new Set(plan.flatMap((l) => /using (\w+) on emails/.exec(l)?.[1] ?? []))];
  if (process.env.BENCH_VERBOSE) log(`claim plan:\n${plan.join('\n')}`);
  return { executionMs: ms('Execution'), planningMs: ms('Planning'), indexes };
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const db = await freshDatabase(teardown);
  stop.checkpoint();
  const temporal = await devTemporal(teardown);
  stop.checkpoint();
  const dnsServer: DnsServer = await startDnsServer();
  teardown.add(() => dnsServer.close());
  const sink = await startSmtpSink();
  teardown.add(() => sink.close());
  const orm = await createOrm(db.url);
  teardown.add(() => orm.close());
  await migrate(orm);
  log(`database ${db.name} created and migrated`);
  stop.checkpoint();

  const { port, pids } = await startServices(teardown, opts.topology, {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    PUBLIC_URL: 'http://127.0.0.1',
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: TASK_QUEUE,
    SMTP_URL: sink.url,
    DNS_SERVERS: dnsServer.address,
    RATE_LIMIT_PER_MINUTE: String(BENCH_RATE_LIMIT),
  });
  log(`service (${opts.topology === 'start' ? 'tidings start' : 'tidings start --api, tidings start --worker'}, ${SERVICE_CODE}) as process ${pids.join(', ')}; API on 127.0.0.1:${port}`);
  stop.checkpoint();

  const sender = async (name: string): Promise<Sender> => {
    const project = await createProject(orm.em.fork(), name);
    const client = jsonClient(port, project.secretKey, 4);
    teardown.add(async () => client.close());
    const domain = `${name}.fairness.test`;
    await verifiedDomain({ client, dnsServer }, domain);
    return { project, domain, client };
  };
  const [a, b] = [await sender('a'), await sender('b')];
  stop.checkpoint();

  // ---- 0. Warm-up.
  log(`warming up with ${opts.warmUp} sends of each project, then ANALYZE`);
  for (const s of [a, b]) {
    await closedLoop(opts.warmUp, 4, async (i) => {
      if (stop.interrupted) return;
      const res = await s.client.request('POST', '/v1/send', { to: `warmup-${i}@${s === a ? 'a' : 'b'}.example.org`, from: `news@${s.domain}`, subject: 'Warm', body: '<p>Warm</p>' });
      if (res.status !== 200) throw new Error(`warm-up: ${res.status} ${res.text}`);
    });
  }
  await sink.waitFor(opts.warmUp * 2, 120_000);
  await query(orm.em.fork(), 'analyze emails');
  stop.checkpoint();

  // ---- 1. Idle: B's single sends with nothing else queued.
  const idle = await singles(sink, b, opts.sends, 'idle', stop, () => undefined);
  log(`idle: ${figures(idle.latencies)}`);
  stop.checkpoint();

  // ---- 2. A's backlog, the claim's plan over it, then released to the engines.
  sink.acceptDelayMs = opts.relayDelayMs;
  await writeBacklog(orm, a, opts.backlog);
  const plan = await claimPlan(orm);
  log(`claim over ${opts.backlog} queued: ${plan.executionMs} ms (planning ${plan.planningMs} ms), indexes ${plan.indexes.join(', ')}`);
  const aAtSink = () => sink.messages.reduce((n, m) => n + (m.envelope.to[0]?.startsWith('backlog-') ? 1 : 0), 0);
  let aCounted = 0;
  let aScanned = 0;
  // Incremental: the sink's array only grows.
  const aArrived = () => {
    for (; aScanned < sink.messages.length; aScanned++) if (sink.messages[aScanned]!.envelope.to[0]?.startsWith('backlog-')) aCounted++;
    return aCounted;
  };
  const releasedAt = Date.now();
  await query(orm.em.fork(), `update emails set queue = ? where queue = ?`, [TASK_QUEUE, PLAN_QUEUE]);
  await query(orm.em.fork(), 'select pg_notify(?, ?)', [OUTBOX_CHANNEL, emailsKey(TASK_QUEUE)]);

  // ---- 3. B's single sends while A's backlog drains.
  const loaded = await singles(sink, b, opts.sends, 'busy', stop, () => opts.backlog - aArrived());
  const waitingFirst = loaded.seen[0] ?? 0;
  const waitingLast = loaded.seen[loaded.seen.length - 1] ?? 0;
  const duringBacklog = loaded.latencies.filter((_, k) => (loaded.seen[k] ?? 0) > 0);
  log(`under the backlog: ${figures(loaded.latencies)}; A's emails not yet at the sink at B's first arrival ${waitingFirst}, at its last ${waitingLast}`);

  // ---- 4. The rest of A's backlog; every email once.
  await sink.waitFor(opts.warmUp * 2 + opts.sends * 2 + opts.backlog, 600_000).catch(() => undefined);
  const drainedAt = Math.max(...sink.messages.map((m) => m.receivedAt.getTime()));
  sink.acceptDelayMs = 0;
  const recipients = new Map<string, number>();
  for (const m of sink.messages) for (const to of m.envelope.to) recipients.set(to, (recipients.get(to) ?? 0) + 1);
  const twice = [...recipients.values()].filter((n) => n > 1).length;
  const aMissing = opts.backlog - aAtSink();
  const bMissing = opts.sends * 2 - [...recipients.keys()].filter((to) => /^(idle|busy)-\d+@b\./.test(to)).length;

  const pgVersion = (await queryOne<{ v: string }>(orm.em.fork(), "select current_setting('server_version') as v"))?.v ?? db.serverVersion;
  const lines = [
    '',
    `fairness (${opts.topology === 'start' ? 'start: tidings start' : 'split: tidings start --api + --worker'})`,
    `  backlog       ${opts.backlog} emails of project A, written QUEUED in one statement${opts.relayDelayMs ? `, relay answering each message after ${opts.relayDelayMs} ms` : ''}`,
    `  claim plan    ${plan.executionMs.toFixed(1)} ms execution, ${plan.planningMs.toFixed(1)} ms planning for ${CLAIM_LIMIT} emails over the backlog (EXPLAIN ANALYZE, rolled back); indexes: ${plan.indexes.join(', ')}`,
    `  B idle        request → sink ${figures(idle.latencies)}`,
    `  B under A     request → sink ${figures(loaded.latencies)}`,
    `                while A's backlog was not yet at the sink: ${duringBacklog.length ? figures(duringBacklog) : 'none (the backlog was gone before B\'s first arrival)'}`,
    `                A's emails not yet at the sink at B's first arrival: ${waitingFirst}, at B's last: ${waitingLast}`,
    `  A drained     ${opts.backlog - aMissing} emails in ${((drainedAt - releasedAt) / 1000).toFixed(1)} s (${((opts.backlog - aMissing) / ((drainedAt - releasedAt) / 1000)).toFixed(0)}/s from release to the last message)`,
    `  check         ${aMissing === 0 && bMissing === 0 && twice === 0 && idle.lost + loaded.lost === 0 ? 'ok' : 'FAILED'}: A missing ${aMissing}, B missing ${bMissing + idle.lost + loaded.lost}, recipients with more than one message ${twice}`,
    `  machine       ${environmentLine(pgVersion)}; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (aMissing !== 0 || bMissing !== 0 || twice !== 0) process.exitCode = 1;
}

runBench(main);
