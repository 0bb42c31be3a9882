/**
 * A slower machine on this one, core by core: BENCH_STEAL=F (bench/goals.ts passes it on) gives F
 * of every core's time to a process of its own at real-time priority, in slices of PERIOD_MS
 * (busy for F of a slice, then blocked for the rest), as a busy hypervisor's steal time takes it
 * from a virtual machine. Every process then runs on cores (1 − F) as fast as they are: the
 * bench's raw pool and PostgreSQL as much as the service. BENCH_CPUS (bench/cpu-limit.ts) is the
 * other model: the whole stack gets N CPUs' time between all its processes, so a workload spread
 * over several of them loses more of its speed than one that runs mostly on one.
 *
 * Linux as root, with util-linux's `chrt` and `taskset`. The stealers stop with the bench; one
 * whose bench was killed outright ends itself within a slice, once it is no longer its child.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import os from 'node:os';

const PERIOD_MS = 10;

/** Runs in each stealer: argv is share, period (ms), the bench's pid. */
const STEALER = `
const [share, period, owner] = process.argv.slice(1).map(Number);
const blocked = new Int32Array(new SharedArrayBuffer(4));
process.stdout.write('ready\\n');
for (;;) {
  const end = performance.now() + share * period;
  while (performance.now() < end);
  if (process.ppid !== owner) process.exit(0);
  Atomics.wait(blocked, 0, 0, (1 - share) * period);
}
`;

let applied: number | undefined;

/** The share taken from each core while a bench runs, for the report's environment line. */
export function stolenShare(): number | undefined {
  return applied;
}

/** BENCH_STEAL, checked: undefined when unset. */
export function requestedSteal(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.BENCH_STEAL;
  if (raw === undefined || raw === '') return undefined;
  const share = Number(raw);
  // Linux lets real-time processes have 95 % of a core (kernel.sched_rt_runtime_us).
  if (!(share > 0 && share <= 0.9)) throw new Error(`BENCH_STEAL must be the share of each core's time to take, above 0 and at most 0.9 (got "${raw}")`);
  if (env.BENCH_CPUS) throw new Error('BENCH_STEAL and BENCH_CPUS are two models of a slower machine: give one');
  return share;
}

/** Starts one stealer per core, each pinned to its core; returns the step that stops them. */
export async function stealCores(share: number): Promise<() => Promise<void>> {
  const stealers: ChildProcess[] = [];
  const stop = async () => {
    const running = stealers.filter((s) => s.pid !== undefined && s.exitCode === null && s.signalCode === null);
    await Promise.all(running.map((s) => new Promise((resolve) => s.once('exit', resolve).kill('SIGKILL'))));
    applied = undefined;
  };
  try {
    for (let core = 0; core < os.cpus().length; core++) {
      const stealer = spawn('chrt', stealerArgs(core, share, process.pid), { stdio: ['ignore', 'pipe', 'pipe'] });
      stealers.push(stealer);
      await ready(stealer);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  applied = share;
  return stop;
}

/** `chrt`'s arguments for the stealer of `core`, which ends itself once it is no longer `owner`'s child. */
export function stealerArgs(core: number, share: number, owner: number): string[] {
  return ['-f', '50', 'taskset', '-c', String(core), process.execPath, '-e', STEALER, String(share), String(PERIOD_MS), String(owner)];
}

function ready(stealer: ChildProcess): Promise<void> {
  let stderr = '';
  stealer.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    stealer.stdout!.once('data', () => resolve());
    stealer.once('error', (err) => reject(new Error(`BENCH_STEAL: could not start chrt (${err.message})`)));
    stealer.once('exit', (code) => reject(new Error(`BENCH_STEAL: the stealer exited (${code}): ${stderr.trim() || 'no reason given'}; it needs root`)));
  });
}
