/**
 * What the bench scripts have in common: a throwaway database, a keep-alive JSON client, a
 * closed-loop load runner, percentiles, the environment line and the RESULT line.
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import { Client } from 'pg';
import { cpuLimit } from './cpu-limit';
import { stolenShare } from './steal';

export const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

export function positiveInt(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${value}`);
  return n;
}

export interface BenchDatabase {
  name: string;
  url: string;
  serverVersion: string;
  /** Drops this database only, never the one the admin URL names. */
  drop(): Promise<void>;
}

/** A fresh, empty database `tidings_bench_<time>` on the server of `adminUrl` (not migrated). */
export async function createBenchDatabase(adminUrl: string): Promise<BenchDatabase> {
  const name = `tidings_bench_${Date.now()}_${process.pid}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  let serverVersion: string;
  try {
    serverVersion = (await admin.query<{ server_version: string }>('show server_version')).rows[0]!.server_version;
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    serverVersion,
    async drop() {
      const c = new Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface JsonResponse {
  status: number;
  body: unknown;
  text: string;
}

/** A closed loop's bookkeeping: per-request latency, answers by status, and the first few errors. */
export class RequestTally {
  readonly latencies: Float64Array;
  readonly statuses = new Map<string, number>();
  readonly firstErrors: string[] = [];
  done = 0;

  constructor(n: number) {
    this.latencies = new Float64Array(n);
  }

  /** Times one request; the response when it answered 200, otherwise undefined (and why is kept). */
  async request(send: () => Promise<JsonResponse>): Promise<JsonResponse | undefined> {
    const t0 = performance.now();
    let status: string;
    let ok: JsonResponse | undefined;
    try {
      const res = await send();
      status = String(res.status);
      if (res.status === 200) ok = res;
      else this.keepError(`${res.status} ${res.text.slice(0, 300)}`);
    } catch (err) {
      status = `network: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
      this.keepError((err as Error).message);
    }
    this.latencies[this.done++] = performance.now() - t0;
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    return ok;
  }

  get ok(): number {
    return this.statuses.get('200') ?? 0;
  }

  /** The statuses other than 200 and the first errors, for the report's errors line. */
  errorDetail(): string {
    const byStatus = this.statuses.size > 1 ? ` (${[...this.statuses].map(([k, v]) => `${k}: ${v}`).join(', ')})` : '';
    return `${byStatus}${this.firstErrors.map((e) => `\n                ${e}`).join('')}`;
  }

  private keepError(message: string): void {
    if (this.firstErrors.length < 5) this.firstErrors.push(message);
  }
}

/**
 * Requests over at most `maxSockets` kept-alive connections, the way a real client library talks
 * to the API (node's fetch pools too, but its pool is not sized by us).
 */
export function jsonClient(port: number, bearerKey: string, maxSockets: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  const request = (method: string, path: string, payload?: unknown) =>
    new Promise<JsonResponse>((resolve, reject) => {
      const data = payload === undefined ? undefined : JSON.stringify(payload);
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method,
          path,
          agent,
          headers: {
            authorization: `Bearer ${bearerKey}`,
            ...(data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown;
            try {
              body = JSON.parse(text);
            } catch {
              body = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body, text });
          });
        },
      );
      req.setTimeout(30_000, () => req.destroy(new Error('timed out after 30 s')));
      req.on('error', reject);
      req.end(data);
    });
  return { request, close: () => agent.destroy() };
}

/** Runs task(0) … task(n-1) with `concurrency` workers, each starting its next task when the last one ends. */
export async function closedLoop(n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) await task(i);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export function environmentLine(pgVersion: string): string {
  const cpu = os.cpus();
  const speeds = coreSpeeds();
  const cores =
    speeds === undefined
      ? ''
      : `; each core alone (a hashing loop pinned to it): ${speeds.map((s) => s.toFixed(2)).join(', ')} of the fastest` +
        (Math.min(...speeds) < UNEQUAL_CORES ? ' (unequal: the rates of a run follow which core its busiest threads get)' : '');
  const limit = cpuLimit();
  const limited = limit === undefined ? '' : `; the bench, the service, Temporal and PostgreSQL limited to ${limit} CPUs' time between them (BENCH_CPUS)`;
  const steal = stolenShare();
  const stolen = steal === undefined ? '' : `; ${Math.round(steal * 100)} % of every core's time taken by a real-time process, as a busy host's steal time (BENCH_STEAL)`;
  return `${cpu.length} cores (${cpu[0]?.model.trim() ?? 'unknown CPU'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, node ${process.version}, ${os.platform()} ${os.arch()}, PostgreSQL ${pgVersion}${cores}${limited}${stolen}`;
}

/** Below this share of the fastest core's speed, the environment line calls the cores unequal. */
const UNEQUAL_CORES = 0.85;
const SPEED_LOOP_MS = 400;
const MAX_CORES_MEASURED = 8;

/**
 * How fast each core is on its own, relative to the fastest: a hashing loop pinned to it with
 * taskset, one core after the other. A virtual machine's cores need not be equal: on one of this
 * workplace's 2-core machines the loop ran at half speed on one core for minutes at a time, then
 * on the other, as the host's own load moved; a run's figures then depend on where the scheduler
 * puts the service's event loop.
 * Measured when the report is written (the machine idle); undefined without taskset or with more
 * than 8 cores.
 */
function coreSpeeds(): number[] | undefined {
  // One core after the other: on a big machine that would take too long for what it tells.
  if (os.cpus().length > MAX_CORES_MEASURED) return undefined;
  const loop = `const c=require('node:crypto');let h=Buffer.alloc(32),n=0;const end=Date.now()+${SPEED_LOOP_MS};while(Date.now()<end){for(let i=0;i<200;i++)h=c.createHash('sha256').update(h).digest();n+=200}process.stdout.write(String(n))`;
  const counts: number[] = [];
  for (let core = 0; core < os.cpus().length; core++) {
    const run = spawnSync('taskset', ['-c', String(core), process.execPath, '-e', loop], { encoding: 'utf8', timeout: 10_000 });
    const count = Number(run.stdout);
    if (run.status !== 0 || !(count > 0)) return undefined;
    counts.push(count);
  }
  const fastest = Math.max(...counts);
  return counts.map((c) => c / fastest);
}

/** A figure set against a goal (docs/performance.md, for a 2-core machine): whether it is met, and by how much. */
export interface Goal {
  goal: string;
  met: boolean;
  measured: string;
}

export function goalLines(goals: Goal[]): string[] {
  return goals.map((g) => `                ${g.met ? 'met    ' : 'NOT met'}  ${g.goal}: ${g.measured}`);
}

/** What starts the last line of a bench's report, the JSON of its figures after it (printResult). */
export const RESULT_PREFIX = 'RESULT ';

/**
 * The last line a bench prints: `RESULT {json}`, the figures bench/goals.ts compares with the goals
 * and with the other runs of its matrix (rates per second, times in ms; NaN becomes null).
 */
export function printResult(result: Record<string, unknown>): void {
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`);
}
