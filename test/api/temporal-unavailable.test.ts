import { type Client, ServiceError } from '@temporalio/client';
import request from 'supertest';
import { createApp } from '../../api/app';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { TemporalGateway } from '../../temporal/client';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';

/**
 * "Write a row, then start its workflow" (api/use-cases/call-temporal.ts) when Temporal cannot be
 * reached: the request answers 503 TEMPORAL_UNAVAILABLE and leaves nothing half-done.
 */
let env: TestEnv;
let project: ProjectWithKeys;
let down: request.Agent;
const auth = () => bearer(project.secretKey);

/** What the client throws when the server does not answer (gRPC UNAVAILABLE, wrapped). */
const unavailable = () =>
  new ServiceError('Failed to start Workflow', {
    cause: Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14, details: 'No connection established', metadata: {} }),
  });

/** A gateway whose every call fails as above, without the gRPC retries' wait of a real dead address. */
function unreachableTemporal(taskQueue: string): TemporalGateway {
  const refuse = async () => {
    throw unavailable();
  };
  const client = { workflow: { start: refuse, signalWithStart: refuse, getHandle: () => ({ cancel: refuse, signal: refuse }) } };
  return new TemporalGateway(client as unknown as Client, taskQueue);
}

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project();
  down = request.agent(createApp({ ...env.deps, temporal: unreachableTemporal(env.taskQueue) }).app);
});
afterAll(async () => {
  await env?.close();
});

const expectUnavailable = (res: request.Response) => expect([res.status, res.body.error?.code]).toEqual([503, 'TEMPORAL_UNAVAILABLE']);

test('an import whose workflow cannot start: 503, and its job is failed with the reason, not left queued', async () => {
  expectUnavailable(await down.post('/contacts/import').set(auth()).attach('file', Buffer.from('email\na@example.org\n'), 'c.csv'));
  const jobs = await query<{ status: string; failure_reason: string }>(env.orm.em.fork(), 'select status, failure_reason from import_jobs where project_id = ?', [
    project.id,
  ]);
  expect(jobs).toEqual([{ status: 'failed', failure_reason: expect.stringMatching(/^Could not start: /) }]);
});

test('a bulk job whose workflow cannot start: 503, and the job is failed', async () => {
  const contact = await env.http().post('/contacts').set(auth()).send({ email: 'bulk@example.org' });
  expectUnavailable(await down.post('/contacts/bulk-unsubscribe').set(auth()).send({ ids: [contact.body.id] }));
  const jobs = await query<{ status: string }>(env.orm.em.fork(), 'select status from bulk_jobs where project_id = ?', [project.id]);
  expect(jobs).toEqual([{ status: 'failed' }]);
});

test('a domain whose verification cannot start: 503, and it is not registered, so the same request can be repeated', async () => {
  expectUnavailable(await down.post('/domains').set(auth()).send({ domain: 'retry.example.org' }));
  expect((await env.http().get(`/domains/project/${project.id}`).set(auth())).body).toEqual([]);
  expect((await env.http().post('/domains').set(auth()).send({ domain: 'retry.example.org' })).status).toBe(201);
});

test('a domain whose workflow cannot be stopped: 503, and it stays registered', async () => {
  const domain = await env.http().post('/domains').set(auth()).send({ domain: 'stays.example.org' });
  expectUnavailable(await down.delete(`/domains/${domain.body.id}`).set(auth()));
  const listed = await env.http().get(`/domains/project/${project.id}`).set(auth());
  expect(listed.body.map((d: { id: string }) => d.id)).toContain(domain.body.id);
});

test('a campaign send Temporal does not take: 503, and the campaign is still a DRAFT', async () => {
  expect((await env.http().post('/domains').set(auth()).send({ domain: 'send.example.org' })).status).toBe(201);
  await env.http().post('/contacts').set(auth()).send({ email: 'reader@example.org' });
  const campaign = await env.http().post('/campaigns').set(auth()).send({ name: 'x', subject: 's', body: 'b', from: 'news@send.example.org' });
  expect(campaign.status).toBe(201);
  expectUnavailable(await down.post(`/campaigns/${campaign.body.id}/send`).set(auth()).send({}));
  expect((await env.http().get(`/campaigns/${campaign.body.id}`).set(auth())).body.status).toBe('DRAFT');
});

test('a sign-up whose verification email cannot start: 503, and no account was created', async () => {
  const body = { email: 'nobody-yet@example.org', password: 'long enough pw' };
  expectUnavailable(await down.post('/auth/signup').send(body));
  expect((await env.http().post('/auth/login').send(body)).status).toBe(401);
});

test("a test run Temporal does not take: 503, no execution is left, and the contact's own entry stays", async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'entered',
    steps: [{ key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'never' } }],
    transitions: [['trigger', 'wait']],
  });
  const contact = await env.http().post('/contacts').set(auth()).send({ email: 'tester@example.org' });
  const real = await env.http().post(`/workflows/${wf.id}/executions`).set(auth()).send({ contactId: contact.body.id });
  expect(real.status).toBe(201);

  expectUnavailable(await down.post(`/workflows/${wf.id}/test-runs`).set(auth()).send({ contactId: contact.body.id }));
  const em = env.orm.em.fork();
  expect(await query(em, 'select id from workflow_executions where workflow_id = ?', [wf.id])).toEqual([{ id: real.body.id }]);
  expect(await query(em, 'select contact_id from workflow_entries where workflow_id = ?', [wf.id])).toEqual([{ contact_id: contact.body.id }]);

  // An event for a test run that cannot be signalled: 503 too.
  const run = await env.http().post(`/workflows/${wf.id}/test-runs`).set(auth()).send({ contactId: contact.body.id });
  expect(run.status).toBe(201);
  expectUnavailable(await down.post(`/workflows/${wf.id}/executions/${run.body.id}/events`).set(auth()).send({ event: 'never' }));
  await env.http().post(`/workflows/${wf.id}/executions/cancel-all`).set(auth());
});
