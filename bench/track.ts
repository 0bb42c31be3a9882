/**
 * Track benchmark with no workflow listening: N `signup` events for N new contacts through
 * POST /v1/track with concurrent keep-alive clients, so each request creates a contact and records
 * an event and nothing else is triggered (bench/workflows.ts measures the same requests when they
 * start journeys).
 *
 *   npx tsx bench/track.ts [--n 5000] [--concurrency 16] [--topology start|split] [--service in-process] [--cold] [--warm-up 12000]
 *
 * Set-up as bench/send.ts (bench/harness.ts startStack): a fresh database, an in-memory Temporal dev
 * server, the test DNS server and SMTP sink, the service (RATE_LIMIT_PER_MINUTE raised), one project
 * and no workflow. --topology as in bench/send.ts: `start` (default), `tidings start` (API and
 * worker under its supervision); `split`, `tidings start --api` and `--worker` started apart; `--service in-process` puts
 * the API and the worker in this process, for profiling. Otherwise this process is the load
 * generator alone, and the service's CPU (all of its processes') is reported apart.
 *
 * Payload: `{email, event: "signup", data: {plan}}`, the plan one of four values, stored on the
 * contact (a track's data is persistent: there is no one-shot variant to choose).
 *
 * A warm-up of --warm-up tracks (12,000: enough for V8 to have optimized the request path, as in
 * bench/send.ts) and an ANALYZE come first, outside the figures; `--cold` empties the tables the
 * warm-up wrote into instead, a new install's database with warm code (bench/harness.ts warmUp).
 *
 * Output: tracks/s (first request to last 200), latency, the CPU time of the service, this process,
 * the Temporal server and PostgreSQL per track, a check (every event and contact stored with its
 * data, no execution), the goals (≥ 1,500 tracks/s, p99 < 50 ms; docs/performance.md) and a RESULT
 * line for bench/goals.ts; the exit code is 1 when the check failed.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import {
  BENCH_RATE_LIMIT,
  cpuSnapshot,
  cpuUsedBetween,
  describeServiceCpu,
  JIT_WARM_UP_REQUESTS,
  runBench,
  serviceCpuSeconds,
  serviceSetup,
  startStack,
  Teardown,
  topologyOption,
  type Interruption,
  warmthLine,
  warmUp,
} from './harness';
import { closedLoop, environmentLine, goalLines, log, percentile, positiveInt, printResult, RequestTally } from './support';

const EVENT = 'signup';
const PLANS = ['free', 'starter', 'pro', 'enterprise'];

function options() {
  const { values } = parseArgs({
    options: {
      n: { type: 'string', default: '5000' },
      concurrency: { type: 'string', default: '16' },
      topology: { type: 'string' },
      service: { type: 'string' },
      cold: { type: 'boolean', default: false },
      'warm-up': { type: 'string', default: String(JIT_WARM_UP_REQUESTS) },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/track.ts [--n 5000] [--concurrency 16] [--topology start|split] [--service in-process] [--cold] [--warm-up 12000]\n');
    process.exit(0);
  }
  return {
    n: positiveInt('n', values.n),
    concurrency: positiveInt('concurrency', values.concurrency),
    topology: topologyOption(values, 'start'),
    cold: values.cold,
    warmUp: positiveInt('warm-up', values['warm-up']),
  };
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const stack = await startStack({ teardown, checkpoint: stop.checkpoint, concurrency: opts.concurrency, topology: opts.topology });
  const { client, orm } = stack;
  const warmup = await warmUp(stack, stop, { n: opts.n, count: opts.warmUp, concurrency: opts.concurrency, tables: 'contacts, events', what: 'tracks', cold: opts.cold }, (i) =>
    client.request('POST', '/v1/track', { email: `warmup${i}@bench.example.org`, event: EVENT, data: { plan: 'free' } }),
  );
  log(`tracking ${opts.n} events with ${opts.concurrency} clients, no workflow listening`);

  const tally = new RequestTally(opts.n);
  let lastOk = 0;
  const loadBefore = os.loadavg()[0]!;
  const cpuBefore = cpuSnapshot(stack);
  const serviceCpuBefore = serviceCpuSeconds(stack);
  const start = performance.now();
  await closedLoop(opts.n, opts.concurrency, async (i) => {
    if (stop.interrupted) return;
    const res = await tally.request(() =>
      client.request('POST', '/v1/track', { email: `user${i}@bench.example.org`, event: EVENT, data: { plan: PLANS[i % PLANS.length] } }),
    );
    if (res) lastOk = performance.now();
  });
  const trackedS = (lastOk - start) / 1000;
  const cpuAfter = cpuSnapshot(stack);
  const serviceCpu = cpuUsedBetween(serviceCpuBefore, serviceCpuSeconds(stack));
  const loadAfter = os.loadavg()[0]!;

  const count = async (sql: string) => Number((await orm.em.fork().getConnection().execute<{ n: string }[]>(sql))[0]!.n);
  const events = await count(`select count(*) as n from events where name = '${EVENT}'`);
  const contacts = await count('select count(*) as n from contacts');
  const withPlan = await count(`select count(*) as n from contacts where data ? 'plan'`);
  const executions = await count('select count(*) as n from workflow_executions');
  const errors = tally.done - tally.ok;
  const checkOk =
    !stop.interrupted && errors === 0 && tally.ok === opts.n && events === opts.n + warmup && contacts === opts.n + warmup && withPlan === contacts && executions === 0;

  const sorted = Float64Array.from(tally.latencies.subarray(0, tally.done)).sort();
  const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : 'n/a');
  const rate = tally.ok / trackedS;
  const p99 = percentile(sorted, 99);
  const cpu = (k: keyof typeof cpuBefore) => cpuAfter[k] - cpuBefore[k];
  // Two decimals: a track costs each process a tenth of a millisecond or two.
  const perTrack = (k: keyof typeof cpuBefore) => `${((1000 * cpu(k)) / Math.max(1, tally.ok)).toFixed(2)} ms`;
  const lines = [
    '',
    `Tidings track bench: POST /v1/track "${EVENT}" for N=${opts.n} new contacts, no workflow listening, concurrency ${opts.concurrency} keep-alive clients${stop.interrupted ? ` (interrupted after ${tally.done} requests)` : ''}`,
    `  environment   ${environmentLine(stack.db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after (1-minute; other work on the machine skews the figures)`,
    `  setup         topology ${stack.topology}: ${serviceSetup(stack)}; this process is the load generator;`,
    `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
    warmthLine(opts.cold, `${opts.warmUp} tracks for other contacts`),
    `  payload       {email, event: "${EVENT}", data: {plan}}: the plan is stored on the contact (persistent)`,
    `  rate limit    RATE_LIMIT_PER_MINUTE raised to ${BENCH_RATE_LIMIT} (default 1000): the limiter still counts every request but never throttles`,
    `  tracked       ${tally.ok} events in ${trackedS.toFixed(2)} s: ${rate.toFixed(0)} tracks/s at the API (first request to last 200)`,
    `  latency       p50 ${ms(percentile(sorted, 50))}   p95 ${ms(percentile(sorted, 95))}   p99 ${ms(p99)}   max ${ms(sorted[sorted.length - 1] ?? NaN)}`,
    `  cpu per track ${serviceCpu === undefined ? 'this process' : `the service ${describeServiceCpu(serviceCpu, { count: tally.ok })}, load generator`} ${perTrack('node')}, Temporal server ${perTrack('temporal')}, PostgreSQL backends of ${stack.db.name} ${perTrack('postgres')}`,
    `  errors        ${errors}${tally.errorDetail()}`,
    `  check         ${checkOk ? 'OK' : 'FAILED'}: ${tally.ok}/${opts.n} answered 200, ${events}/${opts.n + warmup} "${EVENT}" events and ${contacts}/${opts.n + warmup} contacts stored (${warmup} of them the warm-up's), ${withPlan} with their plan, ${executions} workflow executions`,
    `  goals         (no workflow listening, 16 clients, 2 cores${opts.cold ? '; set for a warm database: bench/goals.ts compares a cold run with a warm one' : ''})`,
    ...goalLines([
      { goal: '≥ 1,500 tracks/s', met: rate >= 1500, measured: `${rate.toFixed(0)}/s (${(rate / 1500).toFixed(2)} of it)` },
      { goal: 'p99 < 50 ms', met: p99 < 50, measured: ms(p99) },
    ]),
    '',
  ];
  process.stdout.write(lines.join('\n'));
  printResult({
    bench: 'track',
    topology: stack.topology,
    cold: opts.cold,
    n: opts.n,
    concurrency: opts.concurrency,
    tracksPerS: rate,
    p50Ms: percentile(sorted, 50),
    p99Ms: p99,
    serviceCpuMsPerTrack: serviceCpu === undefined ? null : (1000 * serviceCpu.total) / Math.max(1, tally.ok),
    checkOk,
    interrupted: stop.interrupted,
  });
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
