import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Client } from 'pg';
import { cpuLimit, limitCpus, requestedCpus } from '../../bench/cpu-limit';

/**
 * bench/cpu-limit.ts on this machine's cgroups and PostgreSQL: what it limits, and that PostgreSQL
 * is back where it was afterwards, even after a bench that was killed. The limit here is too high
 * to slow anything. Needs root and cgroup v1's CPU controller (this workplace's machines).
 */

const adminUrl = new URL(process.env.TEST_DATABASE_URL!);
adminUrl.pathname = '/postgres';
const ROOT = '/sys/fs/cgroup/cpu';
const writable = (() => {
  try {
    accessSync(`${ROOT}/cgroup.procs`, constants.W_OK);
    return true;
  } catch {
    return false;
  }
})();

const cpuGroupOf = (pid: number) =>
  readFileSync(`/proc/${pid}/cgroup`, 'utf8')
    .split('\n')
    .find((line) => /^\d+:[^:]*\bcpu\b[^:]*:/.test(line))!
    .replace(/^\d+:[^:]*:/, '');

async function backendPid(): Promise<{ client: Client; pid: number }> {
  const client = new Client({ connectionString: adminUrl.toString() });
  await client.connect();
  return { client, pid: (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid };
}

describe('BENCH_CPUS', () => {
  it('is a number of CPUs, at least 0.1', () => {
    expect(requestedCpus({})).toBeUndefined();
    expect(requestedCpus({ BENCH_CPUS: '1.5' })).toBe(1.5);
    expect(() => requestedCpus({ BENCH_CPUS: 'one' })).toThrow(/BENCH_CPUS must be a number/);
    expect(() => requestedCpus({ BENCH_CPUS: '0' })).toThrow(/at least 0.1/);
  });
});

(writable ? describe : describe.skip)('limitCpus', () => {
  it('puts this process and the backends PostgreSQL forks after it under the quota, and everything back after', async () => {
    const before = await backendPid();
    const postgresHome = cpuGroupOf(before.pid);
    const selfHome = cpuGroupOf(process.pid);
    const undo = await limitCpus(64, adminUrl.toString());
    const group = `/tidings-bench-${process.pid}`;
    let after: { client: Client; pid: number } | undefined;
    try {
      expect(cpuLimit()).toBe(64);
      expect(readFileSync(`${ROOT}${group}/cpu.cfs_quota_us`, 'utf8').trim()).toBe(String(64 * 10_000));
      expect(cpuGroupOf(process.pid)).toBe(group);
      after = await backendPid();
      expect(cpuGroupOf(after.pid)).toBe(group);
      // A backend from before stays where it was.
      expect(cpuGroupOf(before.pid)).toBe(postgresHome);
    } finally {
      await undo();
    }
    expect(cpuLimit()).toBeUndefined();
    expect(existsSync(`${ROOT}${group}`)).toBe(false);
    expect(cpuGroupOf(process.pid)).toBe(selfHome);
    expect(cpuGroupOf(after!.pid)).toBe(postgresHome);
    const again = await backendPid();
    expect(cpuGroupOf(again.pid)).toBe(postgresHome);
    await Promise.all([before.client.end(), after!.client.end(), again.client.end()]);
  });

  it("releases the group of a bench that was killed before it could", async () => {
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    const stale = `${ROOT}/tidings-bench-${gone}`;
    mkdirSync(stale);
    const left = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      writeFileSync(`${stale}/cgroup.procs`, String(left.pid));
      expect(cpuGroupOf(left.pid!)).toBe(`/tidings-bench-${gone}`);
      const undo = await limitCpus(64, adminUrl.toString());
      await undo();
      expect(existsSync(stale)).toBe(false);
      expect(cpuGroupOf(left.pid!)).toBe('/');
    } finally {
      left.kill();
    }
  });
});
