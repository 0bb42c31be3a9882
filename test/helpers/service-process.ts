import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../cli/temporal-server';
import { waitUntil } from './wait';

/**
 * The real service as a child process (`tidings start` from source) with nothing configured: no
 * DATABASE_URL, no TEMPORAL_ADDRESS, no SMTP_URL. It starts an embedded PostgreSQL and a Temporal
 * dev server under DATA_DIR. Tests that kill one role of it can instead give it settings
 * (`startService(dir, ports, { roles: ['--api'], env: { DATABASE_URL, TEMPORAL_ADDRESS, … } })`).
 *
 * Every port is picked free for this run (the fixed defaults 3000/54329/7233/8233 may be taken by
 * other processes on the machine).
 */
export const ROOT = path.resolve(__dirname, '../..');
/**
 * The CLI from source as one node process with tsx's loader, not through the `tsx` command: that
 * one is a parent that relays signals and, when the child does not acknowledge one within ~60 ms
 * (busy loading a module under load), SIGKILLs it and exits 143, which no service can survive.
 */
const CLI = ['--import', 'tsx', 'cli/main.ts'];
const COMPILED_CLI = ['dist/cli/main.js'];
const execFileAsync = promisify(execFile);
export const HEALTH_TIMEOUT_MS = 90_000;

/** Settings the service reads; all unset so that it falls back to its embedded defaults. */
const CONFIG_KEYS = [
  'NODE_ENV',
  'PUBLIC_URL',
  'DATABASE_URL',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_TASK_QUEUE',
  'SMTP_URL',
  'DNS_SERVERS',
  'JWT_SECRET',
  'RATE_LIMIT_PER_MINUTE',
  'DISABLE_SIGNUPS',
  'PORT',
  'DATA_DIR',
  'EMBEDDED_POSTGRES_PORT',
  'TEMPORAL_DEV_PORT',
  'TEMPORAL_UI_PORT',
];

export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of CONFIG_KEYS) delete env[key];
  for (const key of Object.keys(env)) if (key.startsWith('TEST_')) delete env[key];
  return { ...env, ...extra };
}

export interface Ports {
  api: number;
  postgres: number;
  temporal: number;
  ui: number;
}

export async function freePorts(): Promise<Ports> {
  const taken = new Set<number>();
  const next = async () => {
    for (;;) {
      const port = await freePort();
      if (!taken.has(port)) {
        taken.add(port);
        return port;
      }
    }
  };
  return { api: await next(), postgres: await next(), temporal: await next(), ui: await next() };
}

export interface Service {
  child: ChildProcess;
  ports: Ports;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
}

export interface ServiceOptions {
  /** Options of `tidings start`: ['--api'] or ['--worker'] for one role; none for both. */
  roles?: ('--api' | '--worker')[];
  /** Settings on top of the defaults, e.g. the test run's DATABASE_URL and TEMPORAL_ADDRESS instead of the embedded ones. */
  env?: Record<string, string>;
  /** Options for node itself, before the script (a bench's `--cpu-prof`: NODE_OPTIONS refuses it). */
  nodeArgs?: string[];
  /**
   * Run the build (`dist/cli/main.js`, what `npm start` runs; the caller builds it first) instead of
   * the source through tsx's loader. The benches measure this: tsx's output wraps every function it
   * creates in a helper that names it, a cost per closure that the build does not have.
   */
  compiled?: boolean;
}

export function startService(dataDir: string, ports: Ports, opts: ServiceOptions = {}): Service {
  const env = cleanEnv({
    DATA_DIR: dataDir,
    PORT: String(ports.api),
    EMBEDDED_POSTGRES_PORT: String(ports.postgres),
    TEMPORAL_DEV_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    LOG_LEVEL: 'warn',
    ...opts.env,
  });
  // Own process group, so that a failed test can still take down whatever is left (afterAll).
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...(opts.compiled ? COMPILED_CLI : CLI), 'start', ...(opts.roles ?? [])], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stderr = '';
  let done = false;
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  child.stdout!.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
    });
  });
  return { child, ports, stderr: () => stderr, exited, hasExited: () => done };
}

/** The API's and the worker's processes under a `tidings start` supervisor (cli/supervise.ts), by their role flag. */
export function rolePids(supervisor: number): { api: number; worker: number } {
  const children = readFileSync(`/proc/${supervisor}/task/${supervisor}/children`, 'utf8').trim().split(/\s+/).map(Number);
  const withFlag = (flag: string) => {
    const pid = children.find((c) => readFileSync(`/proc/${c}/cmdline`, 'utf8').split('\0').includes(flag));
    if (pid === undefined) throw new Error(`no ${flag} process under the supervisor ${supervisor}`);
    return pid;
  };
  return { api: withFlag('--api'), worker: withFlag('--worker') };
}

/** Resolves once the service printed `text` on stderr (its start-up log); rejects if it exits first or after `timeoutMs`. */
export function waitForStderr(s: Service, text: string, timeoutMs = HEALTH_TIMEOUT_MS): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      s.child.stderr!.off('data', look);
      s.child.off('exit', exited);
      if (err) reject(err);
      else resolve();
    };
    // Called after startService's own listener has added the chunk to s.stderr().
    const look = () => void (s.stderr().includes(text) && done());
    const exited = () => done(new Error(`the service exited before printing "${text}":\n${s.stderr()}`));
    const timer = setTimeout(() => done(new Error(`no "${text}" within ${timeoutMs / 1000}s\nstderr:\n${s.stderr()}`)), timeoutMs);
    s.child.stderr!.on('data', look);
    s.child.once('exit', exited);
    if (s.stderr().includes(text)) done();
    else if (s.hasExited()) exited();
  });
}

/** SIGKILL to the service's process group (the crash under test); resolves once the service process is gone. */
export async function killService(s: Service): Promise<void> {
  if (s.hasExited()) return;
  try {
    process.kill(-s.child.pid!, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
  await s.exited;
}

export const api = (s: Service, p: string) => `http://127.0.0.1:${s.ports.api}${p}`;

export async function waitForHealthy(s: Service): Promise<void> {
  let last = 'no answer yet';
  const healthy = async () => {
    if (s.hasExited()) throw new Error(`the service exited during start-up:\n${s.stderr()}`);
    try {
      const res = await fetch(api(s, '/health'), { signal: AbortSignal.timeout(5_000) });
      const body = (await res.json()) as { database?: { status: string }; temporal?: { status: string } };
      if (res.status === 200 && body.database?.status === 'ok' && body.temporal?.status === 'ok') return true;
      last = `${res.status} ${JSON.stringify(body)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    return false;
  };
  await waitUntil(healthy, { timeoutMs: HEALTH_TIMEOUT_MS, intervalMs: 500 }).catch((err: unknown) => {
    if (s.hasExited()) throw err;
    throw new Error(`not healthy after ${HEALTH_TIMEOUT_MS / 1000}s (last: ${last})\nstderr:\n${s.stderr()}`);
  });
}

/** Stops the service and expects a clean exit, showing what it printed when it did not exit cleanly. */
export async function expectCleanStop(s: Service): Promise<void> {
  const { code, signal } = await stopService(s);
  if (code !== 0 || signal !== null) throw new Error(`exited with ${signal ?? `code ${code}`}, expected code 0:\n${s.stderr()}`);
}

export async function stopService(s: Service, timeoutMs = 45_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (!s.hasExited()) s.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no exit ${timeoutMs / 1000}s after SIGTERM\nstderr:\n${s.stderr()}`)), timeoutMs);
  });
  try {
    return await Promise.race([s.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Processes whose command line mentions the data dir: the embedded postgres (-D) and Temporal (--db-filename). */
export async function processesUsing(dir: string): Promise<{ pid: number; args: string }[]> {
  const { stdout } = await execFileAsync('ps', ['-eo', 'pid=,args=']);
  return stdout
    .split('\n')
    .map((line) => /^\s*(\d+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => !!m && m[2]!.includes(dir) && Number(m[1]) !== process.pid)
    .map((m) => ({ pid: Number(m[1]), args: m[2]! }));
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `tidings <args>` from source with exactly this environment; killed after `timeoutMs`. */
export function runCli(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** `tidings <args>` with nothing configured but `env` (as `startService` runs it). */
export const cli = (args: string[], env: Record<string, string>) => runCli(args, cleanEnv(env));
