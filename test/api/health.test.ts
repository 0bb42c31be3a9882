import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import request from 'supertest';
import { createApp } from '../../api/app';
import type { AppDeps } from '../../api/context';
import { createOrm } from '../../db/orm';
import { TemporalGateway, taskQueuePollers } from '../../temporal/client';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { childWorkerEnv, spawnWorkerProcess } from '../helpers/worker-process';

let env: TestEnv;
let dns: DnsServer;
let smtp: SmtpSink;
beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  // No worker until the last tests start one.
  env = await startTestEnv({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url });
});
afterAll(async () => {
  await env?.close();
  await smtp?.close();
  await dns?.close();
});

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

/** A forced domain check (an Update on the domain's workflow) needs a worker; these are about which one answers. */
describe('GET /domains/:id/verify and the worker', () => {
  let auth: Record<string, string>;
  let domainId: string;
  const verify = () => env.http().get(`/domains/${domainId}/verify`).set(auth);

  beforeAll(async () => {
    const project = await env.project('health');
    auth = bearer(project.secretKey);
    const added = await env.http().post('/domains').set(auth).send({ domain: 'health-check.test' });
    expect(added.status).toBe(201);
    domainId = added.body.id;
  });

  test('with no worker polling the task queue: 503 WORKER_UNAVAILABLE at once, not after the wait', async () => {
    const res = await verify();
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'WORKER_UNAVAILABLE', message: 'No worker is polling the task queue' });
  });

  test('a worker that died without a word holds the workflow on its sticky queue; the next worker still answers the first check', async () => {
    const first = await spawnWorkerProcess(childWorkerEnv(env.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address }));
    try {
      // Its first answer makes that worker the workflow's sticky worker.
      expect((await verify()).status).toBe(200);
    } finally {
      await first.kill();
    }
    await env.startWorker();
    // The server hands the Update's task to another worker only after the sticky schedule-to-start
    // timeout (10 s), which was also the whole wait: this answered 503 WORKER_UNAVAILABLE.
    const res = await verify();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: domainId, domain: 'health-check.test' });
  });

  test('startWorker resolves once the server lists the worker polling for workflow and activity tasks', async () => {
    // What `tidings start` waits for before the API listens: Worker.run() has only begun polling.
    const { worker } = await env.startWorker();
    const pollers = await taskQueuePollers(env.temporal.client.workflowService, env.temporal.client.options.namespace, env.taskQueue);
    expect(pollers.workflow).toContain(worker.options.identity);
    expect(pollers.activity).toContain(worker.options.identity);
  });
});
