import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import request from 'supertest';
import { createApp } from '../api/app';
import type { AppDeps } from '../api/context';
import { createOrm } from '../db/orm';
import { TemporalGateway } from '../temporal/client';
import { startTestEnv, type TestEnv } from './helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

/**
 * A gateway to an address nobody listens on. `TemporalGateway.connect` cannot be used: it
 * calls `Connection.connect`, which fails (after ~10 s) when nothing answers, so a lazy
 * connection stands in for "the server went away after start-up".
 */
function deadTemporalGateway(): TemporalGateway {
  const connection = Connection.lazy({ address: '127.0.0.1:1' });
  return new TemporalGateway(new Client({ connection, namespace: 'default' }), 'unused');
}

test('GET /health: 200 with database and Temporal up, no credentials needed', async () => {
  const res = await env.http().get('/health');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.body).toEqual({ status: 'ok', database: { status: 'ok' }, temporal: { status: 'ok' } });
  expect(res.headers['ratelimit-limit']).toBeUndefined();
});

test('GET /health: 503 with temporal down when Temporal is unreachable, answered promptly', async () => {
  const temporal = deadTemporalGateway();
  const deps: AppDeps = { ...env.deps, temporal, logger: pino({ level: 'silent' }) };
  try {
    const started = Date.now();
    const res = await request(createApp(deps).app).get('/health');
    const elapsed = Date.now() - started;
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ status: 'degraded', database: { status: 'ok' }, temporal: { status: 'down' } });
    // Without a bound the gRPC retries kept the probe waiting ~20 s.
    expect(elapsed).toBeLessThan(6000);
  } finally {
    await temporal.close();
  }
});

test('GET /health: 503 with database down when PostgreSQL is unreachable', async () => {
  // `connect: false`: MikroORM.init would otherwise refuse to start against a dead database.
  const orm = await createOrm('postgres://postgres@127.0.0.1:1/nowhere', { connect: false });
  const deps: AppDeps = { ...env.deps, orm, logger: pino({ level: 'silent' }) };
  try {
    const res = await request(createApp(deps).app).get('/health');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ status: 'degraded', database: { status: 'down' }, temporal: { status: 'ok' } });
  } finally {
    await orm.close();
  }
});
