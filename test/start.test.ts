import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../cli/temporal-server';

/**
 * `tidings start` with nothing configured: no DATABASE_URL, no TEMPORAL_ADDRESS. The real CLI
 * (tsx) starts an embedded PostgreSQL and a Temporal dev server under DATA_DIR, serves the API,
 * stops everything on SIGTERM, and finds its data again on the next start.
 *
 * Every port is picked free for this run (the fixed defaults 3000/54329/7233/8233 may be taken by
 * other processes on the machine); the second start uses fresh ports too, since persistence is
 * about DATA_DIR, not ports.
 */
const ROOT = path.resolve(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
const execFileAsync = promisify(execFile);
const HEALTH_TIMEOUT_MS = 90_000;

jest.setTimeout(150_000);

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

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of CONFIG_KEYS) delete env[key];
  for (const key of Object.keys(env)) if (key.startsWith('TEST_')) delete env[key];
  return { ...env, ...extra };
}

interface Ports {
  api: number;
  postgres: number;
  temporal: number;
  ui: number;
}

async function freePorts(): Promise<Ports> {
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

interface Service {
  child: ChildProcess;
  ports: Ports;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
}

function startService(dataDir: string, ports: Ports): Service {
  const env = cleanEnv({
    DATA_DIR: dataDir,
    PORT: String(ports.api),
    EMBEDDED_POSTGRES_PORT: String(ports.postgres),
    TEMPORAL_DEV_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    LOG_LEVEL: 'warn',
  });
  // Own process group, so that a failed test can still take down whatever is left (afterAll).
  const child = spawn(TSX, ['cli/main.ts', 'start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
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

const api = (s: Service, p: string) => `http://127.0.0.1:${s.ports.api}${p}`;

async function waitForHealthy(s: Service): Promise<void> {
  const deadline = Date.now() + HEALTH_TIMEOUT_MS;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (s.hasExited()) throw new Error(`the service exited during start-up:\n${s.stderr()}`);
    try {
      const res = await fetch(api(s, '/health'), { signal: AbortSignal.timeout(5_000) });
      const body = (await res.json()) as { database?: { status: string }; temporal?: { status: string } };
      if (res.status === 200 && body.database?.status === 'ok' && body.temporal?.status === 'ok') return;
      last = `${res.status} ${JSON.stringify(body)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`not healthy after ${HEALTH_TIMEOUT_MS / 1000}s (last: ${last})\nstderr:\n${s.stderr()}`);
}

/** Stops the service and expects a clean exit, showing what it printed when it did not exit cleanly. */
async function expectCleanStop(s: Service): Promise<void> {
  const { code, signal } = await stopService(s);
  if (code !== 0 || signal !== null) throw new Error(`exited with ${signal ?? `code ${code}`}, expected code 0:\n${s.stderr()}`);
}

async function stopService(s: Service, timeoutMs = 45_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
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

function accepts(port: number): Promise<boolean> {
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
async function processesUsing(dir: string): Promise<{ pid: number; args: string }[]> {
  const { stdout } = await execFileAsync('ps', ['-eo', 'pid=,args=']);
  return stdout
    .split('\n')
    .map((line) => /^\s*(\d+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => !!m && m[2]!.includes(dir) && Number(m[1]) !== process.pid)
    .map((m) => ({ pid: Number(m[1]), args: m[2]! }));
}

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, ['cli/main.ts', ...args], { cwd: ROOT, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let dataDir: string;
const services: Service[] = [];
let first: Service;
let project: { id: string; secretKey: string };
let contactId: string;

beforeAll(() => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-start-'));
  // As root the embedded PostgreSQL runs as the `postgres` user, which must be able to enter the
  // data dir; mkdtemp creates it 0700 (cli/embedded-postgres.ts refuses with a clear message then).
  chmodSync(dataDir, 0o755);
});

afterAll(async () => {
  for (const s of services) {
    if (s.hasExited()) continue;
    await stopService(s, 30_000).catch(() => {
      try {
        process.kill(-s.child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    });
  }
  // Only after a failure: the detached Temporal server (own process group) or postgres may be left.
  for (const { pid } of await processesUsing(dataDir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
});

test('with nothing configured it starts an embedded PostgreSQL and a Temporal dev server', async () => {
  const ports = await freePorts();
  first = startService(dataDir, ports);
  services.push(first);
  await waitForHealthy(first);

  const stderr = first.stderr();
  expect(stderr).toContain(`DATABASE_URL is not set: using an embedded PostgreSQL on 127.0.0.1:${ports.postgres}`);
  expect(stderr).toContain(`Initialising PostgreSQL data directory ${path.join(dataDir, 'postgres')}`);
  expect(stderr).toContain('TEMPORAL_ADDRESS is not set: starting a local Temporal dev server');
  expect(stderr).toContain(`state in ${path.join(dataDir, 'temporal.db')}`);
  expect(stderr).toContain(`API listening on http://localhost:${ports.api}`);
  expect(stderr).toMatch(new RegExp(`Temporal Web UI: http://(localhost|127\\.0\\.0\\.1):${ports.ui}`));

  // The printed addresses answer: the API reference and the Temporal Web UI.
  expect((await fetch(api(first, '/docs'))).status).toBe(200);
  let ui = 0;
  for (let i = 0; i < 20 && ui !== 200; i++) {
    ui = await fetch(`http://127.0.0.1:${ports.ui}/`).then((r) => r.status, () => 0);
    if (ui !== 200) await new Promise((r) => setTimeout(r, 500));
  }
  expect(ui).toBe(200);
});

test('project create reuses the running embedded PostgreSQL; its key works against the service', async () => {
  const result = await cli(['project', 'create', 'demo'], {
    DATA_DIR: dataDir,
    EMBEDDED_POSTGRES_PORT: String(first.ports.postgres),
    LOG_LEVEL: 'silent',
  });
  if (result.code !== 0) throw new Error(`project create exited with ${result.code}:\n${result.stderr}`);
  expect(result.stderr).toContain(`Reusing PostgreSQL already running on 127.0.0.1:${first.ports.postgres}`);
  project = JSON.parse(result.stdout) as { id: string; secretKey: string };
  expect(project.secretKey).toMatch(/^sk_/);

  // The CLI let go of the database without stopping it: the service still has it.
  const res = await fetch(api(first, '/contacts'), {
    method: 'POST',
    headers: { Authorization: `Bearer ${project.secretKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'ada@example.com', data: { plan: 'pro', seats: 3 } }),
  });
  expect(res.status).toBe(201);
  contactId = ((await res.json()) as { id: string }).id;
  expect(first.hasExited()).toBe(false);
  expect((await fetch(api(first, '/health'))).status).toBe(200);
});

test('SIGTERM stops the service with exit 0 and takes PostgreSQL and Temporal down with it', async () => {
  await expectCleanStop(first);
  expect(first.stderr()).toContain('SIGTERM received, shutting down');

  const { ports } = first;
  const open = async () => {
    const checks = await Promise.all(
      (['api', 'postgres', 'temporal', 'ui'] as const).map(async (name) => [name, await accepts(ports[name])] as const),
    );
    return checks.filter(([, ok]) => ok).map(([name]) => `${name}:${ports[name]}`);
  };
  // They are stopped (and awaited) before the service exits; allow a moment for sockets to close.
  let stillOpen = await open();
  for (let i = 0; i < 10 && stillOpen.length; i++) {
    await new Promise((r) => setTimeout(r, 300));
    stillOpen = await open();
  }
  expect(stillOpen).toEqual([]);
  expect(await processesUsing(dataDir)).toEqual([]);
});

test('a second start on the same DATA_DIR finds the project and the contact again', async () => {
  const ports = await freePorts();
  const second = startService(dataDir, ports);
  services.push(second);
  await waitForHealthy(second);
  expect(second.stderr()).toContain(`Starting embedded PostgreSQL on 127.0.0.1:${ports.postgres}`);
  expect(second.stderr()).not.toContain('Initialising PostgreSQL data directory');

  const res = await fetch(api(second, `/contacts/${contactId}`), { headers: { Authorization: `Bearer ${project.secretKey}` } });
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ id: contactId, email: 'ada@example.com', data: { plan: 'pro', seats: 3 } });

  await expectCleanStop(second);
  expect(await processesUsing(dataDir)).toEqual([]);
});

// Each moment a Ctrl-C (or `timeout`) can land on the whole process group while things start: tsx
// (which relays it again), the service and PostgreSQL all get it at once, and a child being spawned
// may get it before it has left our group.
test.each([
  ['PostgreSQL is starting', 'Starting embedded PostgreSQL'],
  ['PostgreSQL is up and the Temporal dev server on its way', 'Starting Temporal dev server'],
])('a SIGTERM to the whole process group while %s stops what was started, with exit 0', async (_moment, logLine) => {
  const ports = await freePorts();
  const service = startService(dataDir, ports);
  services.push(service);
  const deadline = Date.now() + HEALTH_TIMEOUT_MS;
  while (!service.stderr().includes(logLine) && !service.hasExited() && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(service.stderr()).toContain(logLine);
  process.kill(-service.child.pid!, 'SIGTERM');

  await expectCleanStop(service);
  expect(service.stderr()).toContain('SIGTERM received, shutting down');
  expect(service.stderr()).not.toContain('API listening');
  expect(await processesUsing(dataDir)).toEqual([]);
  for (const port of [ports.postgres, ports.temporal, ports.ui]) expect(await accepts(port)).toBe(false);
});

// As root the embedded PostgreSQL runs as `postgres`, which cannot enter a 0700 directory of root's.
(process.getuid?.() === 0 ? test : test.skip)('a DATA_DIR the postgres user cannot enter is refused with a message, not a stack trace', async () => {
  const privateDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-private-'));
  try {
    const result = await cli(['project', 'create', 'demo'], {
      DATA_DIR: privateDir,
      EMBEDDED_POSTGRES_PORT: String(await freePort()),
      LOG_LEVEL: 'silent',
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`cannot enter ${privateDir}`);
    expect(result.stderr).toContain('Point DATA_DIR somewhere it can reach, or set DATABASE_URL');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  } finally {
    rmSync(privateDir, { recursive: true, force: true });
  }
});
