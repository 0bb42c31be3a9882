/**
 * Contacts upsert benchmark: N × POST /contacts through the real HTTP API with concurrent
 * keep-alive clients.
 *
 *   npx tsx bench/contacts.ts [--n 100000] [--concurrency 32] [--max-seconds 600]
 *
 * It sets everything up itself and tears it down again:
 *  - a fresh database `tidings_bench_<time>` on the PostgreSQL server at BENCH_DATABASE_URL
 *    (an admin connection URL, default postgres://postgres@127.0.0.1:5432/postgres), migrated;
 *    dropped at the end (only that database, never the one in the URL);
 *  - an in-memory Temporal dev server on a free port (cli/temporal-server.ts): the contacts routes
 *    do not use Temporal, but the service connects to it at start-up;
 *  - the API as its own process, the way it runs in production (`tidings start --api`, via tsx),
 *    on a free port, with RATE_LIMIT_PER_MINUTE raised so the limiter counts but never throttles;
 *  - one project whose secret key the clients use.
 *
 * The load generator runs in this process, so on a small machine it competes with the API and
 * PostgreSQL for the same cores; the environment is printed with the figures.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { freePort } from '../cli/temporal-server';
import { createOrm, migrate } from '../db/orm';
import { createProject } from '../db/projects/projects';
import { devTemporal, freshDatabase, type Interruption, runBench, type Teardown } from './harness';
import { closedLoop, environmentLine, jsonClient, log, percentile, positiveInt } from './support';

const ROOT = path.resolve(__dirname, '..');
const BENCH_RATE_LIMIT = 1_000_000_000;
const API_LOG_LEVEL = 'warn';

function options() {
  const { values } = parseArgs({
    options: {
      n: { type: 'string', default: '100000' },
      concurrency: { type: 'string', default: '32' },
      'max-seconds': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/contacts.ts [--n 100000] [--concurrency 32] [--max-seconds S]\n');
    process.exit(0);
  }
  return {
    n: positiveInt('n', values.n),
    concurrency: positiveInt('concurrency', values.concurrency),
    maxSeconds: values['max-seconds'] === undefined ? undefined : positiveInt('max-seconds', values['max-seconds']),
  };
}

/** The body of request i: a unique email and data fields of several types (string, number, boolean, date). */
function body(i: number) {
  const plans = ['free', 'starter', 'pro', 'enterprise'];
  return {
    email: `user${i}@bench.example.com`,
    data: {
      plan: plans[i % plans.length],
      seats: (i % 250) + 1,
      mrr: Math.round(((i * 7919) % 100_000) / 10) / 10,
      trial: i % 3 === 0,
      signedUpAt: new Date(Date.UTC(2024, 0, 1) + (i % 365) * 86_400_000).toISOString(),
      company: `Company ${i % 5000}`,
    },
  };
}

interface Outcome {
  latenciesMs: Float64Array;
  done: number;
  statuses: Map<string, number>;
  firstErrors: string[];
  elapsedS: number;
  stoppedEarly: boolean;
}

/** Closed loop over the keep-alive client; stops taking new requests once interrupted or past maxSeconds. */
async function runLoad(
  client: ReturnType<typeof jsonClient>,
  stop: { readonly interrupted: boolean },
  n: number,
  concurrency: number,
  maxSeconds: number | undefined,
): Promise<Outcome> {
  const latenciesMs = new Float64Array(n);
  const statuses = new Map<string, number>();
  const firstErrors: string[] = [];
  let done = 0;
  let stopped = false;
  const count = (k: string) => statuses.set(k, (statuses.get(k) ?? 0) + 1);

  const started = performance.now();
  const deadline = maxSeconds === undefined ? Infinity : started + maxSeconds * 1000;
  let lastDone = 0;
  const progress = setInterval(() => {
    const s = (performance.now() - started) / 1000;
    log(`${done}/${n} in ${s.toFixed(0)} s: ${((done - lastDone) / 10).toFixed(0)} req/s over the last 10 s, ${(done / s).toFixed(0)} on average; load average ${os.loadavg()[0]!.toFixed(1)}`);
    lastDone = done;
  }, 10_000);

  await closedLoop(n, concurrency, async (i) => {
    if (stopped || stop.interrupted || performance.now() > deadline) {
      stopped = true;
      return;
    }
    const payload = body(i);
    const t0 = performance.now();
    try {
      const res = await client.request('POST', '/contacts', payload);
      count(String(res.status));
      if (res.status !== 200 && res.status !== 201 && firstErrors.length < 5) firstErrors.push(`${res.status} ${res.text.slice(0, 300)}`);
    } catch (err) {
      count(`network: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      if (firstErrors.length < 5) firstErrors.push((err as Error).message);
    }
    latenciesMs[done++] = performance.now() - t0;
  });
  const elapsedS = (performance.now() - started) / 1000;
  clearInterval(progress);
  return { latenciesMs: latenciesMs.subarray(0, done), done, statuses, firstErrors, elapsedS, stoppedEarly: done < n };
}

function startApi(env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  // `node --import tsx` rather than the tsx binary: one process, no signal relay in between.
  const child = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'start', '--api'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (c: Buffer) => {
    output = (output + c.toString('utf8')).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitForHealth(port: number, api: ReturnType<typeof startApi>, timeoutMs: number): Promise<void> {
  let exited = false;
  void api.exited.then(() => (exited = true));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exited) throw new Error(`the API exited during start-up:\n${api.output()}`);
    const ok = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`the API did not become healthy within ${timeoutMs / 1000} s:\n${api.output()}`);
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const db = await freshDatabase(teardown, process.env.BENCH_DATABASE_URL);
  const orm = await createOrm(db.url);
  let key: string;
  try {
    await migrate(orm);
    key = (await createProject(orm.em.fork(), 'bench')).secretKey;
  } finally {
    await orm.close();
  }
  log(`database ${db.name} created and migrated`);
  stop.checkpoint();

  const temporal = await devTemporal(teardown);
  stop.checkpoint();

  const port = await freePort();
  const api = startApi({
    NODE_ENV: 'production',
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: temporal.address,
    PORT: String(port),
    RATE_LIMIT_PER_MINUTE: String(BENCH_RATE_LIMIT),
    LOG_LEVEL: API_LOG_LEVEL,
  });
  teardown.add(async () => {
    if (api.child.exitCode !== null) return;
    api.child.kill('SIGTERM');
    const timer = setTimeout(() => api.child.kill('SIGKILL'), 15_000);
    await api.exited;
    clearTimeout(timer);
  });
  await waitForHealth(port, api, 120_000);
  stop.checkpoint();
  log(`API up on 127.0.0.1:${port}; sending ${opts.n} requests with ${opts.concurrency} clients`);

  const loadBefore = os.loadavg()[0]!;
  const client = jsonClient(port, key, opts.concurrency);
  teardown.add(async () => client.close());
  const result = await runLoad(client, stop, opts.n, opts.concurrency, opts.maxSeconds);

  const check = new Client({ connectionString: db.url });
  await check.connect();
  const stored = Number((await check.query<{ n: string }>('select count(*) as n from contacts')).rows[0]!.n);
  await check.end();

  const sorted = Float64Array.from(result.latenciesMs).sort();
  const ok = (result.statuses.get('201') ?? 0) + (result.statuses.get('200') ?? 0);
  const errors = result.done - ok;
  const ms = (v: number) => v.toFixed(1);
  const lines = [
    '',
    `Tidings contacts bench: POST /contacts (upsert), ${result.done} requests${result.stoppedEarly ? ` (stopped early; ${opts.n} planned)` : ''}, ${opts.concurrency} concurrent keep-alive clients`,
    `  environment   ${environmentLine(db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${os.loadavg()[0]!.toFixed(1)} after (1-minute; other work on the machine skews the figures)`,
    `  setup         API in its own process (tidings start --api via tsx, NODE_ENV=production, LOG_LEVEL=${API_LOG_LEVEL}); load generator, API and PostgreSQL share the machine`,
    `  rate limit    RATE_LIMIT_PER_MINUTE raised to ${BENCH_RATE_LIMIT} for the bench (default 1000): the limiter still counts every request in PostgreSQL but never throttles`,
    `  duration      ${result.elapsedS.toFixed(1)} s`,
    `  throughput    ${(result.done / result.elapsedS).toFixed(0)} requests/s`,
    `  latency       p50 ${ms(percentile(sorted, 50))} ms   p95 ${ms(percentile(sorted, 95))} ms   p99 ${ms(percentile(sorted, 99))} ms   max ${ms(sorted[sorted.length - 1] ?? NaN)} ms`,
    `  responses     ${[...result.statuses].map(([k, v]) => `${k}: ${v}`).join(', ')}`,
    `  errors        ${errors}${result.firstErrors.length ? `\n                ${result.firstErrors.join('\n                ')}` : ''}`,
    `  stored        ${stored} contacts in the database`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  if (errors > 0 || stored !== ok) process.exitCode = 1;
}

runBench(main);
