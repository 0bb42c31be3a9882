/**
 * The product's throughput goals, measured: runs the benches of the matrix below one at a time, each
 * as a child process with a stack of its own, reads the RESULT line each prints last, and ends with
 * a table of every figure against its goal and its same-run baseline.
 *
 *   npx tsx bench/goals.ts [--only FILTER[,FILTER…]] [--repeat N] [--n N] [--warm-up N] [--raw N] [--one-at-a-time N] [--list]
 *
 * The matrix, each run in both topologies (`start`: `tidings start`; `split`: `tidings start
 * --api` + `tidings start --worker`; bench/harness.ts Topology):
 *
 *   send persistent warm    bench/send.ts --payload persistent             (data stored on the contact)
 *   send persistent cold    bench/send.ts --payload persistent --cold      (warm code, the tables emptied)
 *   send transient warm     bench/send.ts --payload transient              (a one-shot order number)
 *   track warm / cold       bench/track.ts [--cold]                        (nothing listening)
 *   workflows warm          bench/workflows.ts --shape send-only           (each track starts a journey)
 *
 * A run's name is its words, e.g. `send persistent cold split`. --only keeps the runs that match
 * any of its comma-separated filters, a filter being words joined by `+` that must all be in the
 * name: `--only send`, `--only track+cold,workflows`, `--only split`, `--only persistent+start`.
 * --repeat runs the whole matrix N times over (1), one round after the other, and the table gives
 * each figure's median over the rounds (a cold run's against the warm run's median), with each
 * round's headline figures beside it: a host's speed drifts by a third within minutes here.
 * --n sets every bench's N (default: send 4,000, track 10,000, workflows 1,000, the figures of
 * docs/performance.md); --warm-up every run's warm-up; --raw and --one-at-a-time are
 * bench/send.ts's. --list prints the selected runs and exits. A slower machine, where the goals
 * are the ratios: BENCH_CPUS=N in the environment runs each bench on N CPUs' time
 * (bench/cpu-limit.ts), BENCH_STEAL=F takes F of every core's time while it runs (bench/steal.ts).
 *
 * The goals (2 cores, 16 clients; docs/performance.md):
 *  - /v1/send: ≥ 1,000 accepted/s, p99 < 100 ms, delivered ≥ 0.6 × the same run's raw nodemailer
 *    pool (warm), in both topologies;
 *  - a fresh database is not a slow one: a cold run's rates ≥ 0.8 × the warm run's of the same
 *    bench, payload and topology in this invocation. For /v1/send each rate is taken over its own
 *    run's raw pool first, so that the host's drift between the two runs cancels (the rates alone
 *    are shown beside it); /v1/track has no such baseline, and its drift counts;
 *  - /v1/track: ≥ 1,500/s, p99 < 50 ms; tracks that start journeys: ≥ 1,000/s, p99 < 100 ms, and
 *    executions completed ≥ 0.8 × the same run's bare one-activity workflow.
 *
 * The service is built once here (`npm run build`) and the benches are told so
 * (BENCH_SERVICE_BUILT=1); with BENCH_SERVICE_FROM_SOURCE=1 they run the source instead. A missed
 * goal is a figure, not a failure: the exit code is 0 unless a bench's correctness check failed or
 * a bench ended without its RESULT line (1). Ctrl-C stops the running bench (it cleans up) and the
 * runs after it; the table shows what was measured.
 */
import { execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { requestedCpus } from './cpu-limit';
import { requestedSteal } from './steal';
import { log, positiveInt, RESULT_PREFIX } from './support';

const ROOT = path.resolve(__dirname, '..');
const TOPOLOGIES = ['start', 'split'] as const;
type Topology = (typeof TOPOLOGIES)[number];
const DEFAULT_N = { send: 4000, track: 10000, workflows: 1000 } as const;

interface Run {
  name: string;
  words: string[];
  bench: 'send' | 'track' | 'workflows';
  topology: Topology;
  cold: boolean;
  payload?: 'persistent' | 'transient';
  args: string[];
}

interface Outcome {
  run: Run;
  exitCode: number | null;
  seconds: number;
  result: Record<string, unknown> | undefined;
  /** With --repeat: every round's RESULT, of which `result` holds the medians. */
  rounds?: Record<string, unknown>[];
  /** With --repeat: the exit codes of the rounds that printed no RESULT. */
  roundsWithoutResult?: (number | null)[];
}

function options() {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      repeat: { type: 'string' },
      n: { type: 'string' },
      'warm-up': { type: 'string' },
      raw: { type: 'string' },
      'one-at-a-time': { type: 'string' },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/goals.ts [--only FILTER[,FILTER…]] [--repeat N] [--n N] [--warm-up N] [--raw N] [--one-at-a-time N] [--list]\n');
    process.exit(0);
  }
  const count = (name: string, v: string | undefined) => (v === undefined ? undefined : String(positiveInt(name, v)));
  return {
    only: values.only,
    repeat: values.repeat === undefined ? 1 : positiveInt('repeat', values.repeat),
    n: count('n', values.n),
    warmUp: count('warm-up', values['warm-up']),
    raw: count('raw', values.raw),
    oneAtATime: values['one-at-a-time'] === '0' ? '0' : count('one-at-a-time', values['one-at-a-time']),
    list: values.list,
  };
}

/** Every run of the matrix, a warm run right before its cold one (the machine drifts less between neighbours). */
function matrix(opts: ReturnType<typeof options>): Run[] {
  const runs: Run[] = [];
  const add = (bench: Run['bench'], words: string[], topology: Topology, cold: boolean, extra: string[], payload?: Run['payload']) => {
    const all = [bench, ...words, cold ? 'cold' : 'warm', topology];
    const args = ['--topology', topology, '--n', opts.n ?? String(DEFAULT_N[bench]), ...extra];
    if (cold) args.push('--cold');
    if (opts.warmUp) args.push('--warm-up', opts.warmUp);
    runs.push({ name: all.join(' '), words: all, bench, topology, cold, payload, args });
  };
  const sendArgs = [...(opts.raw ? ['--raw', opts.raw] : []), ...(opts.oneAtATime ? ['--one-at-a-time', opts.oneAtATime] : [])];
  for (const topology of TOPOLOGIES) {
    add('send', ['persistent'], topology, false, ['--payload', 'persistent', ...sendArgs], 'persistent');
    add('send', ['persistent'], topology, true, ['--payload', 'persistent', ...sendArgs], 'persistent');
  }
  for (const topology of TOPOLOGIES) add('send', ['transient'], topology, false, ['--payload', 'transient', ...sendArgs], 'transient');
  for (const topology of TOPOLOGIES) {
    add('track', [], topology, false, []);
    add('track', [], topology, true, []);
  }
  for (const topology of TOPOLOGIES) add('workflows', ['send-only'], topology, false, ['--shape', 'send-only']);
  return runs;
}

/** The runs --only keeps: those matching any filter, a filter's `+`-joined words all in the run's name. */
function select(runs: Run[], only: string | undefined): Run[] {
  if (!only) return runs;
  const known = new Set(runs.flatMap((r) => r.words));
  const filters = only.split(',').map((f) => f.split('+').map((w) => w.trim()).filter(Boolean));
  for (const word of filters.flat()) if (!known.has(word)) throw new Error(`--only: unknown word "${word}" (known: ${[...known].join(', ')})`);
  return runs.filter((r) => filters.some((f) => f.every((w) => r.words.includes(w))));
}

/** One bench as a child process: its report passed through to stdout, its RESULT line kept. */
function runOne(run: Run, stopping: { child?: ReturnType<typeof spawn> }): Promise<Outcome> {
  const script = path.join('bench', `${run.bench}.ts`);
  log(`── ${run.name}: npx tsx ${script} ${run.args.join(' ')}`);
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...run.args], {
    cwd: ROOT,
    env: { ...process.env, BENCH_SERVICE_BUILT: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  stopping.child = child;
  let result: Record<string, unknown> | undefined;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line.startsWith(RESULT_PREFIX)) {
      try {
        result = JSON.parse(line.slice(RESULT_PREFIX.length)) as Record<string, unknown>;
      } catch {
        log(`${run.name}: unreadable RESULT line: ${line.slice(0, 200)}`);
      }
    } else process.stdout.write(`${line}\n`);
  });
  return new Promise((resolve) => {
    child.on('error', (err) => log(`${run.name}: ${err.message}`));
    child.on('close', (code) => {
      stopping.child = undefined;
      resolve({ run, exitCode: code, seconds: (Date.now() - started) / 1000, result });
    });
  });
}

/**
 * One run's rounds as one outcome: the median of each number over the rounds that printed a
 * RESULT, booleans only when true in every one. A round without one (a bench that died) fails the
 * run's check all the same; the medians are then the other rounds'.
 */
function combine(run: Run, rounds: Outcome[]): Outcome {
  const results = rounds.flatMap((o) => (o.result ? [o.result] : []));
  const failed = rounds.filter((o) => o.exitCode !== 0 || !o.result);
  const seconds = rounds.reduce((sum, o) => sum + o.seconds, 0);
  if (results.length === 0) return { ...failed[0]!, run, seconds, result: undefined };
  const result: Record<string, unknown> = { ...results[0] };
  for (const key of Object.keys(result)) {
    const values = results.map((r) => r[key]);
    if (values.every((v) => typeof v === 'number')) result[key] = median(values as number[]);
    else if (values.every((v) => typeof v === 'boolean')) result[key] = values.every(Boolean);
  }
  const withoutResult = rounds.filter((o) => !o.result);
  if (withoutResult.length > 0) result.checkOk = false;
  return { run, exitCode: failed[0]?.exitCode ?? 0, seconds, result, rounds: results, roundsWithoutResult: withoutResult.map((o) => o.exitCode) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

// ---- The table ------------------------------------------------------------------------------

interface Row {
  run: string;
  figure: string;
  value: string;
  baseline: string;
  ratio: string;
  goal: string;
  met: string;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : NaN);
const fmtRate = (v: number) => (Number.isFinite(v) ? `${Math.round(v).toLocaleString('en-US')}/s` : 'n/a');
const fmtMs = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : 'n/a');
const fmtCpu = (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)} ms` : 'n/a');
const fmtRatio = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');
const verdict = (ok: boolean, ...inputs: number[]) => (inputs.some((v) => !Number.isFinite(v)) ? 'n/a' : ok ? 'met' : 'NOT met');

function rowsOf(o: Outcome, outcomes: Outcome[]): Row[] {
  const r = o.result;
  const base = { run: o.run.name, baseline: '', ratio: '' };
  if (!r) return [{ ...base, figure: 'RESULT', value: `none (exit code ${o.exitCode})`, goal: '', met: 'n/a' }];
  const rows: Row[] = [];
  const absolute = (figure: string, v: number, goal: string, ok: boolean, fmt: (v: number) => string, baseline = '', ratio = '') =>
    rows.push({ ...base, figure, value: fmt(v), baseline, ratio, goal, met: verdict(ok, v) });
  const info = (figure: string, value: string, baseline = '', ratio = '') => rows.push({ ...base, figure, value, baseline, ratio, goal: '', met: '' });
  // A cold run against the warm run of the same bench, payload and topology in this invocation.
  const warm = o.run.cold
    ? outcomes.find((w) => !w.run.cold && w.run.bench === o.run.bench && w.run.payload === o.run.payload && w.run.topology === o.run.topology)?.result
    : undefined;
  // With `overRaw` (bench/send.ts's rate over its own run's raw pool, a median of per-round
  // ratios) that ratio is judged: the host's speed, which drifts between the two runs, cancels.
  const coldRatio = (figure: string, key: string, overRaw?: string) => {
    const [v, w] = [num(r[key]), num(warm?.[key])];
    const ratio = overRaw ? num(r[overRaw]) / num(warm?.[overRaw]) : v / w;
    const detail = (run: Record<string, unknown> | undefined) =>
      overRaw ? `${fmtRate(num(run?.[key]))} (${fmtRatio(num(run?.[overRaw]))} × raw)` : fmtRate(num(run?.[key]));
    rows.push({
      ...base,
      figure: `${figure} cold / warm`,
      value: detail(r),
      baseline: warm ? `warm run ${detail(warm)}` : 'no warm run selected',
      ratio: fmtRatio(ratio),
      goal: '≥ 0.80 × warm',
      met: verdict(ratio >= 0.8, ratio),
    });
    if (overRaw && warm) info(`${figure} by rate alone`, fmtRatio(v / w));
  };

  if (o.run.bench === 'send') {
    const raw = num(r.rawPerS);
    if (o.run.cold) {
      coldRatio('accepted', 'acceptedPerS', 'acceptedOverRaw');
      coldRatio('delivered', 'deliveredPerS', 'deliveredOverRaw');
      info('p99', fmtMs(num(r.p99Ms)), warm ? `warm run ${fmtMs(num(warm.p99Ms))}` : '');
      // The yardstick divides out the host's drift during the loads, which the raw pools, run before
      // and after them, do not see: what the new install's tables cost the service, lower is better.
      const [cold, warmCost] = [num(r.serviceAndPostgresOverBench), num(warm?.serviceAndPostgresOverBench)];
      info('CPU cold / warm, yardstick', `${fmtRatio(cold)} × the bench's CPU`, warm ? `warm run ${fmtRatio(warmCost)} ×` : '', fmtRatio(cold / warmCost));
    } else {
      absolute('accepted', num(r.acceptedPerS), '≥ 1,000/s', num(r.acceptedPerS) >= 1000, fmtRate, `raw pool ${fmtRate(raw)}`, fmtRatio(num(r.acceptedPerS) / raw));
      absolute('p99', num(r.p99Ms), '< 100 ms', num(r.p99Ms) < 100, fmtMs);
      rows.push({
        ...base,
        figure: 'delivered',
        value: fmtRate(num(r.deliveredPerS)),
        baseline: `raw pool ${fmtRate(raw)}`,
        ratio: fmtRatio(num(r.deliveredOverRaw)),
        goal: '≥ 0.60 × raw',
        met: verdict(num(r.deliveredOverRaw) >= 0.6, num(r.deliveredOverRaw)),
      });
    }
    info('service CPU per email', fmtCpu(num(r.serviceCpuMsPerEmail)));
  } else if (o.run.bench === 'track') {
    if (o.run.cold) {
      coldRatio('tracks', 'tracksPerS');
      info('p99', fmtMs(num(r.p99Ms)), warm ? `warm run ${fmtMs(num(warm.p99Ms))}` : '');
    } else {
      absolute('tracks', num(r.tracksPerS), '≥ 1,500/s', num(r.tracksPerS) >= 1500, fmtRate);
      absolute('p99', num(r.p99Ms), '< 50 ms', num(r.p99Ms) < 50, fmtMs);
    }
  } else {
    absolute('tracks', num(r.tracksPerS), '≥ 1,000/s', num(r.tracksPerS) >= 1000, fmtRate);
    absolute('p99', num(r.p99Ms), '< 100 ms', num(r.p99Ms) < 100, fmtMs);
    rows.push({
      ...base,
      figure: 'executions completed',
      value: fmtRate(num(r.completedPerS)),
      baseline: `bare workflow ${fmtRate(num(r.bareCompletedPerS))}`,
      ratio: fmtRatio(num(r.completedOverBare)),
      goal: '≥ 0.80 × bare',
      met: verdict(num(r.completedOverBare) >= 0.8, num(r.completedOverBare)),
    });
  }
  if (o.rounds && o.rounds.length > 1) {
    const each = (key: string, fmt: (v: number) => string) => o.rounds!.map((round) => fmt(num(round[key]))).join(' · ');
    const headline =
      o.run.bench === 'send'
        ? `accepted ${each('acceptedPerS', fmtRate)}; delivered / raw ${each('deliveredOverRaw', fmtRatio)}`
        : `tracks ${each('tracksPerS', fmtRate)}; p99 ${each('p99Ms', fmtMs)}`;
    info(`each of ${o.rounds.length} rounds`, headline);
  }
  if (o.roundsWithoutResult?.length) {
    info('rounds without RESULT', `${o.roundsWithoutResult.length} (exit code ${o.roundsWithoutResult.join(', ')}): the medians are the other rounds'`);
  }
  rows.push({ ...base, figure: 'check', value: r.checkOk === true ? 'OK' : 'FAILED', goal: 'OK', met: r.checkOk === true ? 'met' : 'NOT met' });
  return rows;
}

function table(rows: Row[]): string {
  const header: Row = { run: 'run', figure: 'figure', value: 'value', baseline: 'same-run baseline', ratio: 'ratio', goal: 'goal', met: 'met' };
  const keys = Object.keys(header) as (keyof Row)[];
  const width = (k: keyof Row) => Math.max(...[header, ...rows].map((r) => r[k].length));
  const widths = new Map(keys.map((k) => [k, width(k)]));
  const line = (r: Row) => keys.map((k) => r[k].padEnd(widths.get(k)!)).join('  ').trimEnd();
  const out = [line(header), keys.map((k) => '-'.repeat(widths.get(k)!)).join('  ')];
  let last = '';
  for (const r of rows) {
    out.push(line(r.run === last ? { ...r, run: '' } : r));
    last = r.run;
  }
  return out.join('\n');
}

async function main(): Promise<void> {
  const opts = options();
  // A BENCH_CPUS or BENCH_STEAL that is no number fails here, not in every run.
  const cpus = requestedCpus();
  const steal = requestedSteal();
  const runs = select(matrix(opts), opts.only);
  if (opts.list || runs.length === 0) {
    process.stdout.write(runs.map((r) => `${r.name}: npx tsx bench/${r.bench}.ts ${r.args.join(' ')}\n`).join('') || 'no run matches --only\n');
    return;
  }
  if (process.env.BENCH_SERVICE_FROM_SOURCE !== '1') {
    log('building the service once for every run (npm run build)');
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  }

  // Ctrl-C reaches the running bench too (same process group); SIGTERM is passed on. Either way no further run starts.
  const stopping: { requested?: NodeJS.Signals; child?: ReturnType<typeof spawn> } = {};
  const onSignal = (signal: NodeJS.Signals) => {
    stopping.requested = signal;
    log(`${signal}: the running bench stops and cleans up; no further run`);
    if (signal === 'SIGTERM') stopping.child?.kill('SIGTERM');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const started = Date.now();
  const loadBefore = os.loadavg()[0]!;
  const all: Outcome[] = [];
  for (let round = 1; round <= opts.repeat && !stopping.requested; round++) {
    if (opts.repeat > 1) log(`round ${round} of ${opts.repeat}`);
    for (const run of runs) {
      if (stopping.requested) break;
      all.push(await runOne(run, stopping));
    }
  }
  const minutes = (Date.now() - started) / 60_000;
  const outcomes = runs.flatMap((run) => {
    const rounds = all.filter((o) => o.run === run);
    return rounds.length ? [opts.repeat > 1 ? combine(run, rounds) : rounds[0]!] : [];
  });

  const rows = outcomes.flatMap((o) => rowsOf(o, outcomes));
  const failed = outcomes.filter((o) => o.result?.checkOk !== true);
  const measured = rows.filter((r) => (r.met === 'met' || r.met === 'NOT met') && r.figure !== 'check');
  const missed = measured.filter((r) => r.met === 'NOT met');
  process.stdout.write(
    [
      '',
      `Tidings goals: ${all.length} of ${runs.length * opts.repeat} runs in ${minutes.toFixed(1)} min, one at a time${opts.repeat > 1 ? `, ${opts.repeat} rounds (medians)` : ''}${stopping.requested ? ` (stopped by ${stopping.requested})` : ''}; ` +
        `load average ${loadBefore.toFixed(1)} before, ${os.loadavg()[0]!.toFixed(1)} after; ${os.cpus().length} cores` +
        (cpus !== undefined ? `, each bench's stack on ${cpus} CPUs' time (BENCH_CPUS: a slower machine, where the goals are the ratios)` : '') +
        (steal !== undefined ? `, ${Math.round(steal * 100)} % of every core's time taken while each bench runs (BENCH_STEAL: a slower machine, where the goals are the ratios)` : ''),
      `  runs          ${outcomes.map((o) => `${o.run.name} ${o.seconds.toFixed(0)} s${o.result ? (o.roundsWithoutResult?.length ? `, ${o.roundsWithoutResult.length} round(s) without RESULT` : '') : `, no RESULT (exit code ${o.exitCode})`}`).join('; ')}`,
      '',
      table(rows),
      '',
      `  goals         ${
        missed.length ? `${missed.length} not met: ${missed.map((r) => `${r.run}: ${r.figure}`).join('; ')}` : measured.length ? `all ${measured.length} measured here met` : 'none measured'
      }`,
      `  checks        ${failed.length === 0 ? 'every bench\'s correctness check passed' : `FAILED in ${failed.map((o) => o.run.name).join('; ')}`}`,
      '',
    ].join('\n'),
  );
  // A missed goal is a figure; a failed check (or a bench that died) is a failure.
  if (failed.length) process.exitCode = 1;
}

main().catch((err: unknown) => {
  log(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exitCode = 1;
});
