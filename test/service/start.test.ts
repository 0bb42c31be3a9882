import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../cli/temporal-server';
import {
  accepts,
  api,
  cli,
  expectCleanStop,
  freePorts,
  processesUsing,
  type Service,
  startService,
  stopService,
  waitForHealthy,
  waitForStderr,
} from '../helpers/service-process';
import { waitUntil } from '../helpers/wait';

/**
 * `tidings start` with nothing configured: no DATABASE_URL, no TEMPORAL_ADDRESS. The real CLI
 * (node with tsx's loader) starts an embedded PostgreSQL and a Temporal dev server under DATA_DIR, serves the API,
 * stops everything on SIGTERM, and finds its data again on the next start.
 *
 * Every port is picked free for this run (the fixed defaults 3000/54329/7233/8233 may be taken by
 * other processes on the machine); the second start uses fresh ports too, since persistence is
 * about DATA_DIR, not ports.
 */
jest.setTimeout(150_000);

let dataDir: string;
const services: Service[] = [];
let first: Service;
let project: { id: string; secretKey: string };
let contactId: string;
let domainId: string;
let domainKey: string;

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
  const uiAnswers = async () => (ui = await fetch(`http://127.0.0.1:${ports.ui}/`).then((r) => r.status, () => 0)) === 200;
  await waitUntil(uiAnswers, { timeoutMs: 10_000, intervalMs: 500 }).catch(() => undefined);
  expect(ui).toBe(200);
});

/** A request through the API of `s` as JSON. */
async function call(s: Service, method: string, p: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(api(s, p), {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

test('right after the first 200 of /health, a forced domain check (an Update) is answered by the worker', async () => {
  // A session and a project through the API: no other process in between that would warm things up.
  const signup = await call(first, 'POST', '/auth/signup', {}, { email: 'ops@start.test', password: 'start-password' });
  expect(signup.status).toBe(201);
  const cookie = signup.headers.get('set-cookie')!.split(';')[0]!;
  const created = await call(first, 'POST', '/users/@me/projects', { cookie }, { name: 'ops' });
  expect(created.status).toBe(201);
  const auth = { Authorization: `Bearer ${created.body.secretKey as string}` };
  const added = await call(first, 'POST', '/domains', auth, { domain: 'start.test' });
  expect(added.status).toBe(201);
  domainId = added.body.id as string;
  const verified = await call(first, 'GET', `/domains/${domainId}/verify`, auth);
  expect(verified.status).toBe(200);
  expect(verified.body).toMatchObject({ id: domainId, domain: 'start.test' });
  domainKey = created.body.secretKey as string;
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
  // They are stopped (and awaited) before the service exits; the kernel may take a moment to close their sockets.
  let stillOpen: string[] = [];
  await waitUntil(async () => (stillOpen = await open()).length === 0, { timeoutMs: 3_000, intervalMs: 300 }).catch(() => undefined);
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
  // The domain's workflow outlived the first service in Temporal's state; the new worker answers it.
  const verified = await call(second, 'GET', `/domains/${domainId}/verify`, { Authorization: `Bearer ${domainKey}` });
  expect(verified.status).toBe(200);

  await expectCleanStop(second);
  expect(await processesUsing(dataDir)).toEqual([]);
});

// Each moment a Ctrl-C (or `timeout`) can land on the whole process group while things start: the
// service and PostgreSQL get it at once, and a child being spawned may get it before it has left
// our group.
test.each([
  ['PostgreSQL is starting', 'Starting embedded PostgreSQL'],
  ['PostgreSQL is up and the Temporal dev server on its way', 'Starting Temporal dev server'],
])('a SIGTERM to the whole process group while %s stops what was started, with exit 0', async (_moment, logLine) => {
  const ports = await freePorts();
  const service = startService(dataDir, ports);
  services.push(service);
  // The moment it is printed, not a poll later: the start-up goes on meanwhile.
  await waitForStderr(service, logLine).catch(() => undefined);
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
