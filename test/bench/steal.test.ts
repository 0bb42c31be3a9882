import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { requestedSteal, stealCores, stealerArgs, stolenShare } from '../../bench/steal';

/**
 * bench/steal.ts on this machine: one stealer per core, at real-time priority and pinned to its
 * core, gone after the bench, and gone on its own when its bench was killed. The share here is
 * too small to slow the suite. Needs root and util-linux's chrt (this workplace's machines).
 */

const SCHED_FIFO = 1;
const canStealHere = spawnSync('chrt', ['-f', '1', 'true']).status === 0;

/** Scheduling policy and allowed cores of a process, from /proc. */
function schedulingOf(pid: number): { policy: number; cores: string } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cores = /^Cpus_allowed_list:\s*(\S+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!;
  // Field 41 of stat (policy), counted from the state, the third.
  return { policy: Number(fields[41 - 3]), cores };
}

const stealersOf = (parent: number): number[] =>
  (readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)).filter((pid) =>
    readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('performance.now() + share * period'),
  );

async function gone(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ')) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

describe('BENCH_STEAL', () => {
  it('is a share of each core, above 0 and at most 0.9, and not with BENCH_CPUS', () => {
    expect(requestedSteal({})).toBeUndefined();
    expect(requestedSteal({ BENCH_STEAL: '0.5' })).toBe(0.5);
    expect(() => requestedSteal({ BENCH_STEAL: 'half' })).toThrow(/BENCH_STEAL must be/);
    expect(() => requestedSteal({ BENCH_STEAL: '0' })).toThrow(/above 0/);
    expect(() => requestedSteal({ BENCH_STEAL: '0.95' })).toThrow(/at most 0.9/);
    expect(() => requestedSteal({ BENCH_STEAL: '0.5', BENCH_CPUS: '1' })).toThrow(/give one/);
  });
});

(canStealHere ? describe : describe.skip)('stealCores', () => {
  it('runs one stealer per core, real-time and pinned to its core, until it is stopped', async () => {
    const stop = await stealCores(0.05);
    let pids: number[] = [];
    try {
      expect(stolenShare()).toBe(0.05);
      pids = stealersOf(process.pid);
      expect(pids).toHaveLength(os.cpus().length);
      const scheduling = pids.map(schedulingOf);
      expect(scheduling.every((s) => s.policy === SCHED_FIFO)).toBe(true);
      expect(scheduling.map((s) => s.cores).sort()).toEqual(os.cpus().map((_, core) => String(core)).sort());
    } finally {
      await stop();
    }
    expect(stolenShare()).toBeUndefined();
    for (const pid of pids) expect(existsSync(`/proc/${pid}`)).toBe(false);
  });

  it('ends a stealer on its own once its bench is gone', async () => {
    // A node process stands in for the bench: it starts the stealer as its child (the owner, the
    // last argument, is its own pid), says the stealer's pid and exits at once.
    const args = stealerArgs(0, 0.05, 0).slice(0, -1);
    const bench = spawnSync(
      process.execPath,
      ['-e', `const c = require('node:child_process').spawn('chrt', [...JSON.parse(process.argv[1]), String(process.pid)], { stdio: 'ignore' }); console.log(c.pid); process.exit(0);`, JSON.stringify(args)],
      { encoding: 'utf8' },
    );
    const stealer = Number(bench.stdout.trim());
    expect(stealer).toBeGreaterThan(0);
    try {
      expect(await gone(stealer, 10_000)).toBe(true);
    } finally {
      // Not left taking a core's time when this fails.
      if (existsSync(`/proc/${stealer}`)) process.kill(stealer, 'SIGKILL');
    }
  });
});
