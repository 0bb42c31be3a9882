/**
 * The service stack a bench needs to send mail through Temporal, torn down in reverse order however
 * the run ends (bench/send.ts, bench/track.ts, bench/workflows.ts, bench/campaign.ts and
 * bench/import.ts use startStack; bench/contacts.ts and bench/fairness.ts take its pieces:
 * freshDatabase, devTemporal, startServices, Teardown, interruption):
 *
 *  - a fresh database on the PostgreSQL server at BENCH_POSTGRES_ADMIN_URL (default
 *    postgres://postgres@127.0.0.1:5432/postgres), migrated, dropped at the end;
 *  - an in-memory, headless Temporal dev server on a free port (cli/temporal-server.ts);
 *  - the test DNS server and SMTP sink (test/helpers), the relay every email goes to;
 *  - the service, NODE_ENV=production, RATE_LIMIT_PER_MINUTE raised, in one of three topologies
 *    (Topology): `start`, `tidings start` as `npm start` runs it (a process that supervises the API
 *    and the worker as two processes of their own); `split`, `tidings start --api` and `tidings
 *    start --worker` started apart (as a production deployment); `in-process`, the API (createApp)
 *    and a Temporal worker (temporal/worker.ts startWorker; `workerOptions` adds Worker options,
 *    for experiments only) in this process, beside the load generator, for profiling one process;
 *  - a project, a keep-alive JSON client with its secret key, and (verifiedDomain) a domain whose
 *    DKIM/SPF/DMARC records are published in the DNS server and verified, so every email is signed.
 *
 * The child processes run the build (dist/, built here first, once per bench process; skipped with
 * BENCH_SERVICE_BUILT=1, which bench/goals.ts sets after building once); BENCH_SERVICE_FROM_SOURCE=1
 * runs the source through tsx instead. BENCH_SERVICE_NODE_ARGS gives node options to each of them
 * (e.g. `--cpu-prof --cpu-prof-dir=DIR`). A slower machine on this one: BENCH_CPUS=N runs the whole
 * stack on N CPUs' time (bench/cpu-limit.ts); BENCH_STEAL=F takes F of every core's time
 * (bench/steal.ts).
 *
 * Also here: Ctrl-C/SIGTERM handling that stops set-up at the next step, the warm-up, the headers a
 * bench checks on a raw message, per-process CPU time (the service's processes, this process, the
 * Temporal server, PostgreSQL) and the report's lines on them.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DefaultLogger, Runtime, type WorkerOptions } from '@temporalio/worker';
import { createApp } from '../api/app';
import { buildAppDeps } from '../api/deps';
import { listenApp } from '../api/server';
import { findTemporalCli, freePort, startTemporalDevServer, type DevServerHandle } from '../cli/temporal-server';
import { type Config, loadConfig } from '../config';
import { createLogger } from '../logger';
import type { Orm } from '../db/orm';
import { createOrm, migrate } from '../db/orm';
import { createProject, type ProjectWithKeys } from '../db/projects/projects';
import { createDnsLookup } from '../mail/dns';
import { mailerFromConfig } from '../mail/mailer';
import { TemporalGateway, type TemporalSettings } from '../temporal/client';
import { startWorker, type WorkerHandle } from '../temporal/worker';
import { startDnsServer, type DnsServer } from '../test/helpers/dns';
import { freePorts, killService, rolePids, type Service, startService, stopService, waitForHealthy, waitForStderr } from '../test/helpers/service-process';
import { startSmtpSink, type SmtpSink } from '../test/helpers/smtp';
import { limitCpus, parentPid, requestedCpus } from './cpu-limit';
import { requestedSteal, stealCores } from './steal';
import { type BenchDatabase, closedLoop, createBenchDatabase, jsonClient, log } from './support';

export const BENCH_RATE_LIMIT = 1_000_000_000;

/** Cleanup steps, run last-in first-out; a failing step is logged and the rest still run. */
export class Teardown {
  private readonly steps: (() => Promise<unknown>)[] = [];
  add(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }
  async run(): Promise<void> {
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      await step().catch((err: unknown) => log(`cleanup: ${(err as Error).message}`));
    }
  }
}

/**
 * SIGINT/SIGTERM set a flag instead of killing the process, so the database and the (detached)
 * Temporal dev server are still cleaned up: set-up aborts at the next checkpoint, a load loop
 * polls `interrupted`.
 */
export function interruption() {
  const state = { interrupted: false };
  const handler = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping, then cleaning up`);
    state.interrupted = true;
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    get interrupted() {
      return state.interrupted;
    },
    checkpoint() {
      if (state.interrupted) throw new Error('interrupted');
    },
    dispose() {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}

export type Interruption = ReturnType<typeof interruption>;

/**
 * Runs a bench's main: Ctrl-C (or SIGTERM) handling and a teardown around it, the teardown run on
 * every exit (success, failure or interruption), and a failure logged with exit code 1. A bench
 * adds its own cleanup steps to `teardown` and calls `stop.checkpoint()` between steps.
 */
export function runBench(main: (teardown: Teardown, stop: Interruption) => Promise<void>): void {
  const teardown = new Teardown();
  const stop = interruption();
  main(teardown, stop)
    .finally(async () => {
      await teardown.run();
      stop.dispose();
    })
    .catch((err: unknown) => {
      log(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 1;
    });
}

export interface Stack {
  db: BenchDatabase;
  temporal: DevServerHandle;
  dnsServer: DnsServer;
  sink: SmtpSink;
  config: Config;
  settings: TemporalSettings;
  orm: Orm;
  topology: Topology;
  /** The in-process worker; undefined when the service runs as its own process(es). */
  worker: WorkerHandle | undefined;
  /** A Temporal client: the API's own in-process, else one of the bench's (the bench may wrap its methods to time them). */
  gateway: TemporalGateway;
  /** The service's child processes: [tidings start] or [--api, --worker]; empty when it runs in this process. */
  servicePids: number[];
  /** The process whose main thread answers the requests, when it is not this one. */
  apiPid: number | undefined;
  port: number;
  project: ProjectWithKeys;
  client: ReturnType<typeof jsonClient>;
  /** What the bench should print about how it was set up. */
  logLevel: string;
  /** The PostgreSQL server's postmaster (the parent of our backends), for cpuSnapshot; undefined if not on this machine. */
  postmasterPid: number | undefined;
}

const ADMIN_URL = process.env.BENCH_POSTGRES_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A fresh, empty database on the server of `adminUrl` (when given; else BENCH_POSTGRES_ADMIN_URL
 * or the local default), dropped by `teardown`.
 */
export async function freshDatabase(teardown: Teardown, adminUrl: string = ADMIN_URL): Promise<BenchDatabase> {
  const db = await createBenchDatabase(adminUrl);
  teardown.add(async () => (await db.drop(), log(`dropped database ${db.name}`)));
  return db;
}

/** An in-memory, headless Temporal dev server on a free port (TEMPORAL_CLI_PATH or found/built), stopped by `teardown`. */
export async function devTemporal(teardown: Teardown): Promise<DevServerHandle> {
  const cliPath = await findTemporalCli({ cliPath: process.env.TEMPORAL_CLI_PATH, allowBuild: true, log });
  const temporal = await startTemporalDevServer({ cliPath, port: 0, uiPort: false, readinessTimeoutMs: 120_000, log });
  teardown.add(() => temporal.stop());
  return temporal;
}

/**
 * Starts everything listed at the top of this file; each piece registers its own cleanup on
 * `teardown` as soon as it exists. `env` adds to (or overrides) the service configuration.
 */
export async function startStack(opts: {
  teardown: Teardown;
  checkpoint: () => void;
  concurrency: number;
  env?: Record<string, string>;
  logLevel?: string;
  /** Experiments only: Worker.create options on top of temporal/worker.ts's (startWorker passes them through); in-process only. */
  workerOptions?: Partial<WorkerOptions>;
  /** Where the service runs (Topology); `in-process` unless given. */
  topology?: Topology;
}): Promise<Stack> {
  const { teardown, checkpoint } = opts;
  const topology = opts.topology ?? 'in-process';
  const logLevel = opts.logLevel ?? 'warn';
  const cpus = requestedCpus();
  if (cpus !== undefined) {
    teardown.add(await limitCpus(cpus, ADMIN_URL));
    log(`this process, what it starts and PostgreSQL limited to ${cpus} CPUs' time (BENCH_CPUS)`);
  }
  const steal = requestedSteal();
  if (steal !== undefined) {
    teardown.add(await stealCores(steal));
    log(`${Math.round(steal * 100)} % of every core's time taken by a real-time process (BENCH_STEAL)`);
  }
  const db = await freshDatabase(teardown);
  checkpoint();
  const temporal = await devTemporal(teardown);
  checkpoint();
  const dnsServer = await startDnsServer();
  teardown.add(() => dnsServer.close());
  const sink = await startSmtpSink();
  teardown.add(() => sink.close());

  const port = await freePort();
  // The service's settings, whether it runs in this process or as its own.
  const serviceEnv: Record<string, string> = {
    NODE_ENV: 'production',
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: temporal.address,
    SMTP_URL: sink.url,
    DNS_SERVERS: dnsServer.address,
    RATE_LIMIT_PER_MINUTE: String(BENCH_RATE_LIMIT),
    LOG_LEVEL: logLevel,
    ...opts.env,
  };
  const config = loadConfig(serviceEnv);
  const settings = { address: temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue };

  Runtime.install({ logger: new DefaultLogger('WARN') });
  const orm = await createOrm(db.url, {}, settings.taskQueue);
  teardown.add(() => orm.close());
  await migrate(orm);
  log(`database ${db.name} created and migrated`);
  checkpoint();
  const gateway = await TemporalGateway.connect(settings, config);
  teardown.add(() => gateway.close());
  let worker: WorkerHandle | undefined;
  let servicePids: number[] = [];
  if (topology !== 'in-process') {
    if (opts.workerOptions) throw new Error('workerOptions apply to the in-process worker only');
    servicePids = (await startServices(teardown, topology, serviceEnv, port)).pids;
    log(`service (${TOPOLOGY_COMMANDS[topology]}, ${SERVICE_CODE}) as process ${servicePids.join(', ')}; API on 127.0.0.1:${port}, sink at ${sink.url}`);
  } else {
    // As cli/start.ts wires each role, both in this process.
    const dns = createDnsLookup({ servers: config.dnsServers });
    const mailer = mailerFromConfig(config, log);
    teardown.add(async () => mailer.close());
    worker = await startWorker(settings, { orm, dns, mailer, config }, opts.workerOptions ?? {});
    teardown.add(() => worker!.shutdown());
    if (opts.workerOptions) assertApplied(worker, opts.workerOptions);
    checkpoint();
    const { app } = createApp(await buildAppDeps({ config, orm, temporal: gateway, logger: createLogger(config), dns }));
    const server = await listenApp(app, port, '127.0.0.1');
    teardown.add(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
    log(`API on 127.0.0.1:${port}, worker on task queue "${settings.taskQueue}", sink at ${sink.url}`);
  }
  checkpoint();

  const backend = await orm.em.fork().getConnection().execute<{ pid: number }[]>('select pg_backend_pid() as pid');
  const postmasterPid = parentPid(backend[0]!.pid);

  const project = await createProject(orm.em.fork(), 'bench');
  const client = jsonClient(port, project.secretKey, opts.concurrency);
  teardown.add(async () => client.close());
  checkpoint();
  return { db, temporal, dnsServer, sink, config, settings, orm, topology, worker, gateway, servicePids, apiPid: servicePids[0], port, project, client, logLevel, postmasterPid };
}

/**
 * Where the service runs: `start` is `tidings start` (as `npm start`: it supervises the API and the
 * worker as two processes of its own), `split` is `tidings start --api` + `tidings start --worker`
 * started apart (as a production deployment scales them), both child processes of the bench;
 * `in-process` is the API and a worker in the bench's own process, for profiling one process (the
 * load generator then takes event-loop time from the API).
 */
export type Topology = 'in-process' | 'start' | 'split';

const TOPOLOGY_COMMANDS: Record<Exclude<Topology, 'in-process'>, string> = {
  start: 'tidings start: API and worker under one supervisor',
  split: 'tidings start --api, tidings start --worker',
};

/**
 * A bench's --topology and --service options: `--topology start|split`, or `--service in-process`
 * (the service in the bench's process) or `--service process` (another name for `--topology
 * start`). Contradicting values are refused.
 */
export function topologyOption(values: { topology?: string; service?: string }, fallback: Topology): Topology {
  const { topology, service } = values;
  if (topology !== undefined && topology !== 'start' && topology !== 'split') throw new Error(`--topology must be start or split, not ${topology}`);
  if (service !== undefined && service !== 'in-process' && service !== 'process') throw new Error(`--service must be in-process or process, not ${service}`);
  const fromService = service === undefined ? undefined : service === 'process' ? 'start' : 'in-process';
  if (topology !== undefined && fromService !== undefined && topology !== fromService) throw new Error(`--service ${service} and --topology ${topology} contradict each other`);
  return topology ?? fromService ?? fallback;
}

/** How the report's setup line describes where the service runs (the bench adds what its own process does). */
export function serviceSetup(stack: Pick<Stack, 'topology' | 'logLevel'>): string {
  if (stack.topology === 'in-process') return `the API (createApp, LOG_LEVEL=${stack.logLevel}) and the Temporal worker run in this process`;
  const processes = stack.topology === 'split' ? 'two processes of its own' : 'a supervisor and its two processes';
  return `the service is ${processes} (${TOPOLOGY_COMMANDS[stack.topology]}, ${SERVICE_CODE}, NODE_ENV=production, LOG_LEVEL=${stack.logLevel})`;
}

/** BENCH_SERVICE_FROM_SOURCE=1: the service's processes run the source through tsx, not the build. */
const SERVICE_FROM_SOURCE = process.env.BENCH_SERVICE_FROM_SOURCE === '1';
/** Which code the service's processes run, for a report. */
export const SERVICE_CODE = SERVICE_FROM_SOURCE ? 'the source through tsx' : 'the build, dist/cli/main.js';
/** What a worker process prints once the server has seen it poll (cli/start.ts). */
const WORKER_READY = 'Worker polling task queue';

let built = process.env.BENCH_SERVICE_BUILT === '1';
/** `npm run build`, once per process (and not at all from source, or when the caller built it: BENCH_SERVICE_BUILT=1). */
export function buildService(): void {
  if (SERVICE_FROM_SOURCE || built) return;
  log('building the service (npm run build)');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: path.resolve(__dirname, '..'), stdio: 'inherit' });
  built = true;
}

/**
 * The service's processes for the topology with `env`, the API on `port` (free if not given):
 * resolves once the API is healthy and (split) the worker polls. Stopped by `teardown`. The pids
 * come API first, then the worker, then (start) the supervisor. They run the build, as `npm start`
 * does, or the source with BENCH_SERVICE_FROM_SOURCE=1 (slower: tsx names every closure it
 * creates through a helper).
 */
export async function startServices(
  teardown: Teardown,
  topology: Exclude<Topology, 'in-process'>,
  env: Record<string, string>,
  port?: number,
): Promise<{ port: number; pids: number[] }> {
  buildService();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-bench-'));
  teardown.add(async () => rmSync(dataDir, { recursive: true, force: true }));
  // BENCH_SERVICE_NODE_ARGS: e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the service.
  const nodeArgs = process.env.BENCH_SERVICE_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const apiPort = port ?? (await freePort());
  const start = async (roles: ('--api' | '--worker')[], ready: (s: Service) => Promise<void>, ownPort: number) => {
    const service = startService(dataDir, { ...(await freePorts()), api: ownPort }, { roles, env: { ...env, PORT: String(ownPort) }, nodeArgs, compiled: !SERVICE_FROM_SOURCE });
    teardown.add(() => stopService(service, 30_000).catch(() => killService(service)));
    await ready(service);
    return service.child.pid!;
  };
  if (topology === 'start') {
    const supervisor = await start([], waitForHealthy, apiPort);
    const { api, worker } = rolePids(supervisor);
    return { port: apiPort, pids: [api, worker, supervisor] };
  }
  const [api, worker] = await Promise.all([
    start(['--api'], waitForHealthy, apiPort),
    start(['--worker'], (s) => waitForStderr(s, WORKER_READY), await freePort()),
  ]);
  return { port: apiPort, pids: [api, worker] };
}

/**
 * Fails when `wanted` was not applied: temporal/worker.ts startWorker passes Worker options through
 * only since the delivery engine (before, it took the bundle and task queue alone), and a tuned
 * run must not be reported as one. Only options the compiled options keep under the same name,
 * with a plain value, can be compared; the others are trusted.
 */
function assertApplied(worker: WorkerHandle, wanted: Partial<WorkerOptions>): void {
  const compiled = worker.worker.options as unknown as Record<string, unknown>;
  for (const [name, value] of Object.entries(wanted)) {
    if (typeof value === 'object' || !(name in compiled) || compiled[name] === value) continue;
    throw new Error(`--worker-options: ${name} is ${String(compiled[name])}, not ${String(value)}: this temporal/worker.ts startWorker does not pass Worker options through`);
  }
}

/**
 * A warm-up long enough that V8 has optimized a request path (functions that run once per request
 * reach TurboFan only after thousands of calls). Counted with node's --log-code in the API
 * process of bench/send.ts: after 4,000 requests (and an idle pause), about 150 functions of
 * /v1/send's path were first compiled by TurboFan during the load, their compiling some 3 % of the
 * machine's CPU; after 12,000 and no pause, about half as many.
 */
export const JIT_WARM_UP_REQUESTS = 12_000;

/**
 * Before a bench measures: `count` requests (`request(i)`, `concurrency` at a time; min(1,000, n/5)
 * unless the bench says), then `settle` (what must be done before the tables are read), then:
 *  - warm: ANALYZE of `tables`, as autovacuum does within a minute of a new install's first writes.
 *    Until then every index that starts with project_id costs the same to the planner, and a plan
 *    a connection caches may read a whole project per request. The bench leaves the warm-up's rows
 *    out of its figures;
 *  - `cold`: the tables the warm-up wrote into are a new install's again (emptyAgain): empty, never
 *    analyzed. The load then grows them from nothing on the planner's first guesses, which is what a
 *    cold run measures; the processes keep the code the warm-up compiled, because every new process
 *    compiles its request path in its first seconds, database cold or warm.
 * The code is as warm as `count` makes it (JIT_WARM_UP_REQUESTS). Returns how many of the warm-up's
 * requests left rows behind: `count`, or 0 when cold.
 */
export async function warmUp(
  stack: Pick<Stack, 'orm'>,
  stop: Pick<Interruption, 'interrupted'>,
  opts: { n: number; count?: number; concurrency: number; tables: string; what: string; cold: boolean; settle?: (count: number) => Promise<void> },
  request: (i: number) => Promise<unknown>,
): Promise<number> {
  const count = opts.count ?? Math.min(1000, Math.ceil(opts.n / 5));
  const sql = <T>(text: string) => stack.orm.em.fork().getConnection().execute<T[]>(text);
  const before = opts.cold ? await rowCounts(sql) : undefined;
  log(`warming up with ${count} ${opts.what}, then ${before ? 'emptying the tables it wrote into' : 'ANALYZE'}`);
  const started = performance.now();
  await closedLoop(count, opts.concurrency, async (i) => {
    if (!stop.interrupted) await request(i);
  });
  const seconds = (performance.now() - started) / 1000;
  log(`warm-up: ${count} ${opts.what} in ${seconds.toFixed(1)} s (${(count / seconds).toFixed(0)}/s)`);
  await opts.settle?.(count);
  if (!before) {
    await sql(`analyze ${opts.tables}`);
    return count;
  }
  const emptied = await emptyAgain(sql, before);
  log(`cold: emptied ${emptied.join(', ')}; no statistics on them`);
  return 0;
}

type Sql = <T>(text: string) => Promise<T[]>;

/** The number of rows in each table of the service's schema. */
async function rowCounts(sql: Sql): Promise<Map<string, number>> {
  const tables = await sql<{ name: string }>(
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = current_schema() and c.relkind = 'r'`,
  );
  const counts = await sql<{ name: string; n: number }>(tables.map((t) => `select '${t.name}' as name, count(*)::int as n from "${t.name}"`).join(' union all '));
  return new Map(counts.map((c) => [c.name, c.n]));
}

/**
 * Every table that was empty at `before` and holds rows now, truncated, and every table empty at
 * `before` (so the ones the truncation cascaded to as well) left as a new install's: no column
 * statistics, no row estimate (reltuples -1, which a truncation keeps only if the table was never
 * analyzed; autovacuum may have analyzed it meanwhile), no counters for autovacuum to act on.
 * Tables that held rows before (the project, its keys and domain) keep them: the bench made
 * those, not the warm-up.
 */
async function emptyAgain(sql: Sql, before: Map<string, number>): Promise<string[]> {
  const now = await rowCounts(sql);
  const wasEmpty = [...before].filter(([, n]) => n === 0).map(([t]) => t);
  const written = wasEmpty.filter((t) => (now.get(t) ?? 0) > 0).sort();
  if (written.length === 0) return [];
  await sql(`truncate ${written.map((t) => `"${t}"`).join(', ')} cascade`);
  // A cascade reaches only tables that point at these; none of the bench's own rows may go with them.
  const after = await rowCounts(sql);
  const lost = [...now].filter(([t, n]) => (before.get(t) ?? 0) > 0 && (after.get(t) ?? 0) < n).map(([t]) => t);
  if (lost.length) throw new Error(`emptying the warm-up's tables took rows the bench made from ${lost.join(', ')}`);
  const oids = `(select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = current_schema() and c.relname in (${wasEmpty.map((t) => `'${t}'`).join(', ')}))`;
  await sql(`delete from pg_statistic where starelid in ${oids} or starelid in (select indexrelid from pg_index where indrelid in ${oids})`);
  await sql(`update pg_class set reltuples = -1 where oid in ${oids}`);
  await sql(`select pg_stat_reset_single_table_counters(oid) from pg_class where oid in ${oids}`);
  return written;
}

/** A verified domain: publish what POST /domains asks for, then force the check. Returns its id. */
export async function verifiedDomain(stack: Pick<Stack, 'client' | 'dnsServer'>, domain: string): Promise<string> {
  const added = await stack.client.request('POST', '/domains', { domain });
  if (added.status !== 201) throw new Error(`POST /domains: ${added.status} ${added.text}`);
  const body = added.body as { id: string; records: { type: 'TXT'; name: string; value: string }[] };
  for (const r of body.records) stack.dnsServer.set(r.name, r.type, [r.value]);
  const verified = await stack.client.request('GET', `/domains/${body.id}/verify`);
  if ((verified.body as { status?: string }).status !== 'verified') throw new Error(`domain not verified: ${verified.text}`);
  return body.id;
}

/** The Message-ID and DKIM d= of a raw message (headers only; both are short, unfolded lines here). */
export function headersOf(raw: Buffer) {
  const head = raw.subarray(0, Math.max(0, raw.indexOf('\r\n\r\n'))).toString('latin1');
  return {
    messageId: /^message-id:\s*(<[^>\r\n]+>)/im.exec(head)?.[1],
    dkimDomain: /^dkim-signature:[^]*?\bd=([^;\s]+)/im.exec(head)?.[1],
  };
}

/** CPU seconds (user + system) so far of this process, the Temporal dev server and PostgreSQL. */
export interface CpuSnapshot {
  node: number;
  temporal: number;
  /** The backends connected to the bench's database (by their process title), while they live. */
  postgres: number;
  /** The whole PostgreSQL server: every database, background processes, exited backends. */
  postgresServer: number;
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** /proc/<pid>/stat (or <pid>/task/<tid>/stat, one thread) after the command: state is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14]. */
function statOf(pid: number | string): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined; // not Linux, or the process is gone
  }
}

/** CPU seconds (user + system) a live process has used so far, with its waited-for children; undefined once it is gone (or not on Linux). */
export function cpuSecondsOf(pid: number): number | undefined {
  const f = statOf(pid);
  if (!f) return undefined;
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / ticksPerSecond();
}

/**
 * CPU seconds (user + system) so far of each of the service's processes, API first; undefined when
 * the service runs in this process (its CPU is then this process's). Diff two with cpuUsedBetween.
 */
export function serviceCpuSeconds(stack: Pick<Stack, 'servicePids'>): number[] | undefined {
  return stack.servicePids.length ? stack.servicePids.map((pid) => cpuSecondsOf(pid) ?? NaN) : undefined;
}

/** Per process and in total, what the service's processes used between two serviceCpuSeconds. */
export function cpuUsedBetween(before: number[] | undefined, after: number[] | undefined): { each: number[]; total: number } | undefined {
  if (!before || !after) return undefined;
  const each = after.map((v, i) => v - before[i]!);
  return { each, total: each.reduce((a, b) => a + b, 0) };
}

/**
 * "the service 3.1 s (API 2.0 s, worker 1.1 s)", and the supervisor's with `start`; with `per`, the same in
 * ms per `per.count` things, without "the service" and followed by "per <unit>" when given.
 */
export function describeServiceCpu(used: { each: number[]; total: number }, per?: { count: number; unit?: string }): string {
  const fmt = (seconds: number) => (per ? `${((1000 * seconds) / Math.max(1, per.count)).toFixed(2)} ms` : `${seconds.toFixed(1)} s`);
  const [api, worker, supervisor] = used.each;
  const parts =
    used.each.length >= 2 ? ` (API ${fmt(api!)}, worker ${fmt(worker!)}${supervisor === undefined ? '' : `, supervisor ${fmt(supervisor)}`})` : '';
  return per ? `${fmt(used.total)}${per.unit ? ` per ${per.unit}` : ''}${parts}` : `the service ${fmt(used.total)}${parts}`;
}

/** The report's line on how warm the database and the code were. */
export function warmthLine(cold: boolean, warmUp: string): string {
  return cold
    ? `  database      cold (--cold): first ${warmUp} to compile the code, then the tables they wrote into emptied, without statistics: a new install's tables (the machine's page cache is not dropped)`
    : `  database      warm: first ${warmUp}, then ANALYZE (left out of every figure)`;
}

export interface MainThreadSnapshot {
  /** CPU seconds (user + system) of the process's main thread: in Node, the event loop's. */
  cpuSeconds: number;
  /** Times the scheduler took the core from it while it could still run. */
  preemptions: number;
}

/** The main thread of a live process (Linux only; undefined elsewhere or once it is gone). */
export function mainThreadOf(pid: number): MainThreadSnapshot | undefined {
  try {
    const f = statOf(`${pid}/task/${pid}`);
    if (!f) return undefined;
    const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
    const preemptions = Number(/^nonvoluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1]);
    return { cpuSeconds: (Number(f[11]) + Number(f[12])) / ticksPerSecond(), preemptions };
  } catch {
    return undefined;
  }
}

/**
 * Reads /proc (Linux only; elsewhere the other processes count 0). `postgres` is the backends
 * whose title names the bench's database (a backend that exits between two snapshots takes its
 * time with it; the pool keeps them open during a run); `postgresServer` is the postmaster, all its
 * children and what it has collected from children that already exited (cutime/cstime), so it
 * includes other databases' work and the WAL writer, checkpointer and autovacuum. The Temporal
 * server is the `start-dev --port <port>` process.
 */
export function cpuSnapshot(stack: Pick<Stack, 'temporal' | 'postmasterPid' | 'db'>): CpuSnapshot {
  const port = stack.temporal.address.split(':').pop();
  const tck = ticksPerSecond();
  const seconds = (f: string[], from: number) => (Number(f[from]) + Number(f[from + 1])) / tck;
  let temporal = 0;
  let postgres = 0;
  let postgresServer = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    /* not Linux */
  }
  const postmaster = String(stack.postmasterPid);
  for (const pid of pids) {
    const f = statOf(pid);
    if (!f) continue;
    if (pid === postmaster) postgresServer += seconds(f, 11) + seconds(f, 13);
    else if (f[1] === postmaster) {
      postgresServer += seconds(f, 11);
      try {
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(` ${stack.db.name} `)) postgres += seconds(f, 11);
      } catch {
        /* gone meanwhile */
      }
    } else {
      try {
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        if (args.includes('start-dev') && args[args.indexOf('--port') + 1] === port) temporal += seconds(f, 11) + seconds(f, 13);
      } catch {
        /* gone meanwhile */
      }
    }
  }
  const self = process.cpuUsage();
  return { node: (self.user + self.system) / 1e6, temporal, postgres, postgresServer };
}
