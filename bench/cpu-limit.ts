/**
 * A slower machine on this one: BENCH_CPUS=N (bench/goals.ts passes it on) holds the whole stack
 * a bench runs (this process with the load generator, the sink and the raw pool; the Temporal dev
 * server and the service, started after; PostgreSQL's backends, forked after) to N CPUs' worth of
 * time between them, through a Linux cgroup's CPU quota: a machine short of CPU, where the rates
 * fall and the goals are ratios to the same run's raw pool. A process that runs mostly on one core
 * (the raw pool) loses less of its speed there than a stack spread over several; bench/steal.ts is
 * the other model, every core slower alike.
 *
 * Linux only, as root, with the cgroup CPU controller (v1 at /sys/fs/cgroup/cpu, or v2), and a
 * PostgreSQL server on this machine; otherwise it refuses with the reason. The teardown puts
 * PostgreSQL back where it was.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';

/** The quota's period: short, so that a process held back waits milliseconds, not a tenth of a second. */
const PERIOD_US = 10_000;

interface Hierarchy {
  /** Where the CPU controller's hierarchy is mounted. */
  root: string;
  /** Which line of /proc/<pid>/cgroup names a process's group in it. */
  matches: (line: string) => boolean;
  setQuota(dir: string, cpus: number): void;
}

const V1: Hierarchy = {
  root: '/sys/fs/cgroup/cpu',
  matches: (line) => /^\d+:[^:]*\bcpu\b[^:]*:/.test(line),
  setQuota(dir, cpus) {
    writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
    writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(Math.round(cpus * PERIOD_US)));
  },
};

const V2: Hierarchy = {
  root: '/sys/fs/cgroup',
  matches: (line) => line.startsWith('0::'),
  setQuota(dir, cpus) {
    writeFileSync(path.join(dir, 'cpu.max'), `${Math.round(cpus * PERIOD_US)} ${PERIOD_US}`);
  },
};

let applied: number | undefined;

/** The limit this process runs under, for the report's environment line. */
export function cpuLimit(): number | undefined {
  return applied;
}

/** BENCH_CPUS, checked: undefined when unset. */
export function requestedCpus(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.BENCH_CPUS;
  if (raw === undefined || raw === '') return undefined;
  const cpus = Number(raw);
  if (!Number.isFinite(cpus) || cpus < 0.1) throw new Error(`BENCH_CPUS must be a number of CPUs, at least 0.1 (got "${raw}")`);
  return cpus;
}

/**
 * Puts this process and the PostgreSQL server of `adminUrl` in a group of their own limited to
 * `cpus`; returns the step that undoes it.
 */
export async function limitCpus(cpus: number, adminUrl: string): Promise<() => Promise<void>> {
  const hierarchy = existsSync(path.join(V1.root, 'cpu.cfs_quota_us')) ? V1 : readable(path.join(V2.root, 'cgroup.controllers'))?.split(/\s+/).includes('cpu') ? V2 : undefined;
  if (!hierarchy) throw new Error('BENCH_CPUS: no cgroup CPU controller here (Linux with cgroup v1 or v2 only)');
  const postmaster = await postmasterPid(adminUrl);
  releaseAbandoned(hierarchy);
  const home = groupOf(hierarchy, postmaster);
  const self = groupOf(hierarchy, process.pid);
  const dir = path.join(hierarchy.root, `${GROUP_PREFIX}${process.pid}`);
  try {
    if (hierarchy === V2) writeFileSync(path.join(V2.root, 'cgroup.subtree_control'), '+cpu');
    mkdirSync(dir);
    hierarchy.setQuota(dir, cpus);
    move(dir, process.pid);
    move(dir, postmaster);
  } catch (err) {
    throw new Error(`BENCH_CPUS: could not set up the CPU group ${dir} (${(err as Error).message}); it needs root`, { cause: err });
  }
  applied = cpus;
  return async () => {
    move(path.join(hierarchy.root, home), postmaster);
    release(dir, (pid) => path.join(hierarchy.root, pid === process.pid ? self : home));
    applied = undefined;
  };
}

const GROUP_PREFIX = 'tidings-bench-';

/** Empties the group (PostgreSQL's backends forked meanwhile, this process) into `destination`'s, and removes it. */
function release(dir: string, destination: (pid: number) => string): void {
  for (const pid of (readable(path.join(dir, 'cgroup.procs')) ?? '').split('\n').filter(Boolean)) move(destination(Number(pid)), Number(pid));
  rmdirSync(dir);
}

/** A bench killed outright could not put PostgreSQL back: its group goes now, its processes to the top. */
function releaseAbandoned(hierarchy: Hierarchy): void {
  for (const name of readdirSync(hierarchy.root)) {
    const owner = Number(name.startsWith(GROUP_PREFIX) ? name.slice(GROUP_PREFIX.length) : NaN);
    if (Number.isInteger(owner) && !existsSync(`/proc/${owner}`)) release(path.join(hierarchy.root, name), () => hierarchy.root);
  }
}

function move(dir: string, pid: number): void {
  try {
    writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
  } catch (err) {
    // A process that exited meanwhile has nothing left to move.
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

function groupOf(hierarchy: Hierarchy, pid: number): string {
  const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').find(hierarchy.matches);
  if (!line) throw new Error(`BENCH_CPUS: process ${pid} is in no CPU cgroup`);
  return line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
}

/** The postmaster: the parent of a backend, which must be on this machine. */
async function postmasterPid(adminUrl: string): Promise<number> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const backend = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    const ppid = parentPid(backend);
    if (ppid === undefined) throw new Error('BENCH_CPUS: the PostgreSQL server is not on this machine');
    return ppid;
  } finally {
    await client.end();
  }
}

/** A process's parent on this machine (the postmaster of a PostgreSQL backend); undefined if it is not here. */
export function parentPid(pid: number): number | undefined {
  const ppid = Number(/^PPid:\s*(\d+)/m.exec(readable(`/proc/${pid}/status`) ?? '')?.[1]);
  return Number.isInteger(ppid) && ppid > 1 ? ppid : undefined;
}

function readable(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
