import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Client as TemporalClient } from '@temporalio/client';
import { freePort } from '../../cli/temporal-server';
import {
  freePorts,
  killService,
  type Service,
  startService,
  stopService,
  waitForHealthy,
  waitForStderr,
} from './service-process';

/**
 * The service as a deployment runs it: N API processes (`tidings start --api`) and M worker
 * processes (`tidings start --worker`), from source, on one database, one Temporal address and one
 * task queue, delivering to one SMTP relay and resolving through one DNS server. Each process can
 * be SIGKILLed and started again; an API keeps its port across restarts, so a client retrying the
 * same URL reaches the new process. Every process links mail to API 1 (PUBLIC_URL), as replicas
 * behind one address would.
 *
 *   const t = await createTopology({ apis: 2, workers: 2, taskQueue, databaseUrl, temporalAddress, smtpUrl, dnsAddress });
 *   await t.start();                        // every process, in parallel
 *   await fetch(t.apis[1]!.url('/health'));
 *   await t.workers[0]!.kill();             // SIGKILL; t.workers[0]!.start() brings up a new one
 *   await t.close();
 */
export interface TopologyOptions {
  apis: number;
  workers: number;
  taskQueue: string;
  databaseUrl: string;
  temporalAddress: string;
  smtpUrl: string;
  dnsAddress: string;
  /** More settings for every process (RATE_LIMIT_PER_MINUTE, JOURNEY_TIME_SCALE, …). */
  env?: Record<string, string>;
}

export interface Role {
  /** 'api 1', 'worker 2', … for messages. */
  readonly name: string;
  /** The running process's pid (its worker identity starts with `<pid>@`); undefined when none runs. */
  pid(): number | undefined;
  running(): boolean;
  /** An API resolves once /health answers ok; a worker once it polls the task queue (it bundles the workflows first). */
  start(): Promise<void>;
  /** SIGKILL; the signal is sent before this returns its promise, so a caller need not await it. */
  kill(): Promise<void>;
  /** SIGTERM (SIGKILL if it hangs). */
  stop(): Promise<void>;
}

export interface ApiRole extends Role {
  readonly port: number;
  url(p: string): string;
}

export interface Topology {
  readonly apis: ApiRole[];
  readonly workers: Role[];
  /** Starts every process that is not running, all at once. */
  start(): Promise<void>;
  /** The worker whose Temporal identity this is (identities are `<pid>@<host>/<random>`, temporal/worker.ts). */
  workerOf(identity: string): Role | undefined;
  /** Everything each process printed so far, for failure messages. */
  output(): string;
  /** Stops whatever still runs (SIGTERM, SIGKILL if it hangs) and removes the data dir. */
  close(): Promise<void>;
}

const WORKER_READY = 'Worker polling task queue';

export async function createTopology(opts: TopologyOptions): Promise<Topology> {
  const apiPorts: number[] = [];
  while (apiPorts.length < opts.apis) {
    const port = await freePort();
    if (!apiPorts.includes(port)) apiPorts.push(port);
  }
  // Only the API listens; the embedded services these ports are for are not used (DATABASE_URL and TEMPORAL_ADDRESS are set).
  const base = await freePorts();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-topology-'));
  const env = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    PUBLIC_URL: `http://127.0.0.1:${apiPorts[0] ?? base.api}`,
    DATABASE_URL: opts.databaseUrl,
    TEMPORAL_ADDRESS: opts.temporalAddress,
    TEMPORAL_TASK_QUEUE: opts.taskQueue,
    SMTP_URL: opts.smtpUrl,
    DNS_SERVERS: opts.dnsAddress,
    DOMAIN_CHECK_INTERVAL_SECONDS: '1',
    SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
    // Four processes, the Temporal server and the test itself share PostgreSQL's 100 connections here.
    DATABASE_POOL_MAX: '10',
    ...opts.env,
  };
  /** Every process started, with what it logged (pino writes JSON lines to stdout; the CLI its own lines to stderr). */
  const lives: { name: string; service: Service; stdout: string[] }[] = [];

  const role = (name: string, flag: '--api' | '--worker', port: number, ready: (s: Service) => Promise<void>) => {
    let current: Service | undefined;
    const live = () => (current && !current.hasExited() ? current : undefined);
    return {
      name,
      pid: () => live()?.child.pid,
      running: () => live() !== undefined,
      async start() {
        if (live()) throw new Error(`${name} is already running`);
        current = startService(dataDir, { ...base, api: port }, { roles: [flag], env });
        const stdout: string[] = [];
        current.child.stdout!.on('data', (c: Buffer) => stdout.push(c.toString('utf8')));
        lives.push({ name, service: current, stdout });
        await ready(current);
      },
      kill: () => (current ? killService(current) : Promise.resolve()),
      async stop() {
        if (live()) await stopService(current!, 20_000).catch(() => killService(current!));
      },
    };
  };

  const apis: ApiRole[] = apiPorts.map((port, i) => ({
    ...role(`api ${i + 1}`, '--api', port, waitForHealthy),
    port,
    url: (p: string) => `http://127.0.0.1:${port}${p}`,
  }));
  const workers: Role[] = Array.from({ length: opts.workers }, (_, i) =>
    role(`worker ${i + 1}`, '--worker', base.api, (s) => waitForStderr(s, WORKER_READY)),
  );
  const all = [...workers, ...apis];

  return {
    apis,
    workers,
    async start() {
      await Promise.all(all.filter((r) => !r.running()).map((r) => r.start()));
    },
    workerOf(identity) {
      const pid = Number(/^(\d+)@/.exec(identity)?.[1]);
      return workers.find((w) => lives.some((l) => l.name === w.name && l.service.child.pid === pid));
    },
    output: () =>
      lives.map(({ name, service, stdout }) => `--- ${name} (pid ${service.child.pid}) ---\n${service.stderr()}${stdout.join('')}`).join('\n'),
    async close() {
      await Promise.all(lives.map(({ service }) => (service.hasExited() ? undefined : stopService(service, 20_000).catch(() => killService(service)))));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A Temporal server with persistence and visibility on PostgreSQL, started and stopped through
 * deploy/temporal-postgres.sh (what the README and docker-compose.yml describe), on a free port
 * range, with databases and a state directory of its own: `stop()` stops it and drops both
 * databases. The script creates the namespace and registers the search attributes before it returns.
 */
export interface PostgresTemporal {
  address: string;
  /** The persistence database; visibility is `<database>_visibility`. */
  database: string;
  stop(): Promise<void>;
}

const SCRIPT = path.resolve(__dirname, '../../deploy/temporal-postgres.sh');
/** The script binds its port base and the eight ports after it. */
const PORTS_USED = 9;

export async function startPostgresTemporal(opts: { log?: (line: string) => void } = {}): Promise<PostgresTemporal> {
  const database = `temporal_topo_${Date.now()}_${process.pid}`;
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-temporal-pg-'));
  const env = (base: number) => ({
    ...process.env,
    TEMPORAL_PG_DB: database,
    TEMPORAL_PG_PORT_BASE: String(base),
    TEMPORAL_PG_STATE_DIR: stateDir,
    TEMPORAL_PG_START_TIMEOUT: '150',
  });
  let base = await freePortRange(PORTS_USED);
  const stop = async () => {
    const res = await runScript(['stop', '--drop'], env(base), 60_000);
    if (res.code !== 0) opts.log?.(`temporal-postgres.sh stop --drop: exit ${res.code}\n${res.stderr}`);
    rmSync(stateDir, { recursive: true, force: true });
  };
  // A port of the range may be taken between the check and the server's bind: one more range then.
  for (let attempt = 1; ; attempt++) {
    const res = await runScript(['start'], env(base), 300_000);
    for (const line of res.stderr.trim().split('\n')) if (line) opts.log?.(line);
    if (res.code === 0) return { address: res.stdout.trim().split('\n').pop()!, database, stop };
    await stop();
    if (attempt >= 2 || !/already in use/.test(res.stderr)) throw new Error(`temporal-postgres.sh start: exit ${res.code}\n${res.stderr}`);
    base = await freePortRange(PORTS_USED);
  }
}

function runScript(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    execFile('bash', [SCRIPT, ...args], { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof (err as NodeJS.ErrnoException).code === 'string') return reject(err);
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/**
 * The first of `count` consecutive ports that are all free on 127.0.0.1 now, all below 32768:
 * Temporal's SQL schema keeps membership ports in a smallint (the server dies at start with
 * "value … is out of range for type smallint" on a higher one).
 */
/** The first of `count` consecutive free ports, below 32768 (Temporal keeps membership ports as smallint). */
export async function freePortRange(count: number): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const base = 10_000 + Math.floor(Math.random() * (32_768 - count - 10_000));
    let free = true;
    for (let p = base; p < base + count && free; p++) free = await canListen(p);
    if (free) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * The worker identity that ran each completed campaign batch (sendCampaignBatch), oldest first,
 * over every run of the campaign's workflow (it continues as new when its history grows), read
 * from the histories the server keeps. Map them to processes with `Topology.workerOf`.
 */
export async function campaignBatchWorkers(client: TemporalClient, workflowId: string): Promise<string[]> {
  const runs = new Map<string, number>();
  // The latest run from the history service; earlier runs (continued as new) from visibility.
  const latest = await client.workflow.getHandle(workflowId).describe();
  runs.set(latest.runId, latest.startTime.getTime());
  for await (const w of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.set(w.runId, w.startTime.getTime());
  const identities: string[] = [];
  for (const [runId] of [...runs].sort((a, b) => a[1] - b[1])) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const batches = new Set<string>();
    for (const e of history.events ?? []) {
      if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'sendCampaignBatch') batches.add(String(e.eventId));
      const started = e.activityTaskStartedEventAttributes;
      if (started?.identity && batches.has(String(started.scheduledEventId))) identities.push(started.identity);
    }
  }
  return identities;
}
