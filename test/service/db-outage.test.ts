import net from 'node:net';
import express from 'express';
import { requestLog } from '../../api/middleware/request-log';
import { Client } from 'pg';
import request from 'supertest';
import type { Response } from 'supertest';
import { errorHandler } from '../../api/middleware/errors';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * A TCP proxy in front of the test run's PostgreSQL, so the test can take the database away from
 * this app alone: `stop` refuses new connections and cuts the open ones (the server is down),
 * `start('hang')` accepts connections and never answers (a host that drops packets), `start()`
 * forwards again on the same port.
 */
class PgProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  /** Source ports of the proxy's live connections to PostgreSQL: pg_stat_activity.client_port of this app's backends. */
  readonly backendPorts = new Set<number>();
  port = 0;
  mode: 'forward' | 'hang' | 'stopped' = 'stopped';

  constructor(private readonly target: { host: string; port: number }) {}

  async start(mode: 'forward' | 'hang' = 'forward'): Promise<void> {
    await this.stop();
    const server = net.createServer((client) => {
      this.track(client);
      if (mode === 'hang') return;
      const upstream = net.connect(this.target.port, this.target.host);
      this.track(upstream);
      upstream.once('connect', () => {
        const port = upstream.localPort!;
        this.backendPorts.add(port);
        upstream.once('close', () => this.backendPorts.delete(port));
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
    this.mode = mode;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.mode = 'stopped';
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => this.sockets.delete(socket));
  }
}

const databaseUrl = new URL(process.env.TEST_DATABASE_URL!);
const proxy = new PgProxy({ host: databaseUrl.hostname, port: Number(databaseUrl.port || 5432) });
let env: TestEnv;
/** Straight to PostgreSQL, past the proxy: terminates backends and checks what was written. */
let admin: Client;

beforeAll(async () => {
  // knex prints "Connection Error: …" with console.log for each dead connection its pool drops: expected here.
  const log = console.log;
  jest.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
    if (!String(args[0]).includes('Connection Error')) log(...args);
  });
  await proxy.start();
  const viaProxy = new URL(databaseUrl);
  viaProxy.port = String(proxy.port);
  env = await startTestEnv({ DATABASE_URL: viaProxy.toString() });
  admin = new Client({ connectionString: databaseUrl.toString() });
  await admin.connect();
});

// A failed test must not leave the next one without a database.
afterEach(async () => {
  if (proxy.mode !== 'forward') await proxy.start();
});

afterAll(async () => {
  await env.close();
  await admin.end();
  await proxy.stop();
});

/**
 * What an administrator (or a failover) does to the app's connections. Only this app's backends:
 * test files running in parallel share the run's database.
 */
async function terminateAppBackends(): Promise<number> {
  const { rows } = await admin.query<{ terminated: boolean }>(
    `select pg_terminate_backend(pid) as terminated from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid() and client_port = any($1::int[])`,
    [[...proxy.backendPorts]],
  );
  return rows.filter((r) => r.terminated).length;
}

function expectUnavailable(res: Response): void {
  expect({ status: res.status, retryAfter: res.headers['retry-after'], body: res.body }).toEqual({
    status: 503,
    retryAfter: '5',
    body: {
      success: false,
      message: 'The database is unavailable',
      error: {
        code: 'DATABASE_UNAVAILABLE',
        message: 'The database is unavailable',
        statusCode: 503,
        requestId: expect.any(String),
        suggestion: expect.any(String),
      },
      timestamp: expect.any(String),
    },
  });
}

test('backends terminated under load: every answer is a success or 503 DATABASE_UNAVAILABLE, and the pool recovers by itself', async () => {
  const p = await env.project('outage under load');
  const answers: Array<{ email: string; res?: Response; dropped?: unknown }> = [];
  let terminated = 0;
  for (let wave = 0; wave < 10; wave++) {
    const emails = Array.from({ length: 20 }, (_, i) => `load-${wave}-${i}@example.org`);
    const inFlight = emails.map((email) =>
      env
        .http()
        .post('/contacts')
        .set(bearer(p.secretKey))
        .send({ email })
        .then(
          (res) => ({ email, res }),
          (dropped: unknown) => ({ email, dropped }),
        ),
    );
    // Once the first answer is back the rest of the wave is underway: cut their connections.
    await Promise.race(inFlight);
    terminated += await terminateAppBackends();
    answers.push(...(await Promise.all(inFlight)));
  }
  expect(terminated).toBeGreaterThan(0);

  expect(answers.filter((a) => a.dropped !== undefined).map((a) => String(a.dropped))).toEqual([]);
  const unavailable = answers.filter((a) => a.res!.status === 503);
  for (const a of unavailable) expectUnavailable(a.res!);
  const created = answers.filter((a) => a.res!.status === 201 || a.res!.status === 200);
  expect(created.length + unavailable.length).toBe(answers.length);
  // The load did meet the outage (otherwise this test proves nothing).
  expect(unavailable.length).toBeGreaterThan(0);

  // Recovered without help: the next requests are served.
  const after = await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'after@example.org' });
  expect(after.status).toBe(201);
  await env.http().get(`/contacts/${after.body.id}`).set(bearer(p.secretKey)).expect(200);

  // Every contact the API said it saved is there, once; a 503'd one may or may not be.
  const { rows } = await admin.query<{ email: string; n: number }>(
    'select email, count(*)::int as n from contacts where project_id = $1 group by email',
    [p.id],
  );
  const stored = new Map(rows.map((r) => [r.email, r.n]));
  expect(created.filter((a) => stored.get(a.email) !== 1).map((a) => a.email)).toEqual([]);
  expect(rows.filter((r) => r.n !== 1)).toEqual([]);
});

// Bounded by the pool's timeouts (db/orm.ts): with knex's defaults the hanging case would wait 60 s and not finish in time.
test('database unreachable: 503 DATABASE_UNAVAILABLE with Retry-After, /health 503, served again once it is back', async () => {
  const p = await env.project('outage');
  await env.http().get('/contacts').set(bearer(p.secretKey)).expect(200);

  // Down: connections refused, the pooled ones cut.
  await proxy.stop();
  expectUnavailable(await env.http().get('/contacts').set(bearer(p.secretKey)));
  expectUnavailable(await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'down@example.org' }));
  const healthDown = await env.http().get('/health');
  expect({ status: healthDown.status, database: healthDown.body.database }).toEqual({ status: 503, database: { status: 'down' } });

  // Unreachable: connection attempts get no answer at all.
  await proxy.start('hang');
  expectUnavailable(await env.http().get('/contacts').set(bearer(p.secretKey)));
  expect((await env.http().get('/health')).status).toBe(503);

  // Back: the same app serves again, nothing restarted.
  await proxy.start();
  await env.http().get('/contacts').set(bearer(p.secretKey)).expect(200);
  await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'back@example.org' }).expect(201);
  const healthUp = await env.http().get('/health');
  expect({ status: healthUp.status, database: healthUp.body.database }).toEqual({ status: 200, database: { status: 'ok' } });
}, 30_000);

test('only connectivity is a 503: errors of the database or of the code stay 500', async () => {
  // A server error whose message ends like pg's own for a lost connection (as one quoting user
  // data could), a plain server error, and a bug.
  const raised = await env.orm.em
    .fork()
    .execute(`do $$ begin raise exception 'x - Connection terminated unexpectedly'; end $$`)
    .catch((e: unknown) => e);
  expect(raised).toMatchObject({ code: 'P0001', message: expect.stringMatching(/ - Connection terminated unexpectedly$/) });
  const division = await env.orm.em
    .fork()
    .execute('select 1 / 0')
    .catch((e: unknown) => e);
  expect(division).toMatchObject({ code: '22012' });
  const errors: Record<string, unknown> = { raised, division, bug: new TypeError("Cannot read properties of undefined (reading 'id')") };

  const app = express();
  app.use(requestLog(env.deps.logger));
  app.get('/:name', (req, _res, next) => next(errors[req.params.name]));
  app.use(errorHandler);
  for (const name of Object.keys(errors)) {
    const res = await request(app).get(`/${name}`);
    expect({ name, status: res.status, code: res.body.error.code }).toEqual({ name, status: 500, code: 'INTERNAL_SERVER_ERROR' });
  }
});
