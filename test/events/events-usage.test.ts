import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/** GET /events/stats, GET /events/:eventName/usage and DELETE /events/:eventName on the real database. */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

const DAY = 86_400_000;

const get = (p: ProjectWithKeys, path: string) => env.http().get(path).set(bearer(p.secretKey));
const del = (p: ProjectWithKeys, path: string) => env.http().delete(path).set(bearer(p.secretKey));
const post = (p: ProjectWithKeys, path: string, body: object) => env.http().post(path).set(bearer(p.secretKey)).send(body);

async function track(p: ProjectWithKeys, email: string, event: string) {
  const res = await post(p, '/v1/track', { email, event });
  expect(res.status).toBe(200);
  return res.body.data as { contact: string; event: string; timestamp: string };
}

/** An event written as the service would, at a chosen time (tracking cannot backdate). */
async function insertEvent(p: ProjectWithKeys, id: string, contactId: string, name: string, at: Date) {
  await query(env.orm.em.fork(), 'insert into events (id, project_id, contact_id, name, created_at) values (?, ?, ?, ?, ?)', [
    id,
    p.id,
    contactId,
    name,
    at.toISOString(),
  ]);
}

async function workflow(p: ProjectWithKeys, name: string, eventName: string) {
  const res = await post(p, '/workflows', { name, eventName });
  expect(res.status).toBe(201);
  return res.body as { id: string; steps: { id: string }[] };
}

async function step(p: ProjectWithKeys, workflowId: string, body: object) {
  const res = await post(p, `/workflows/${workflowId}/steps`, body);
  expect(res.status).toBe(201);
  return res.body as { id: string };
}

beforeAll(async () => {
  env = await startTestEnv();
  [project, other] = await Promise.all([env.project('events usage A'), env.project('events usage B')]);
});

afterAll(() => env.close());

test('GET /events/stats: totals over all time, 24 hours and 7 days, and per name, most frequent first', async () => {
  const p = await env.project('events stats');
  expect((await get(p, '/events/stats')).body).toEqual({ total: 0, last24h: 0, last7d: 0, byName: [] });

  const a = await track(p, 'ann@example.org', 'signup');
  await track(p, 'bob@example.org', 'signup');
  const last = await track(p, 'ann@example.org', 'signup');
  const paid = await track(p, 'bob@example.org', 'paid');
  await track(other, 'ann@example.org', 'signup');
  const threeDays = new Date(Date.now() - 3 * DAY);
  const tenDays = new Date(Date.now() - 10 * DAY);
  const opened = new Date(Date.now() - 2 * DAY);
  await insertEvent(p, 'evt_stats_3d', a.contact, 'signup', threeDays);
  await insertEvent(p, 'evt_stats_10d', a.contact, 'signup', tenDays);
  await insertEvent(p, 'evt_stats_opened', a.contact, 'email.opened', opened);

  const res = await get(p, '/events/stats');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    total: 7,
    last24h: 4,
    last7d: 6,
    byName: [
      { name: 'signup', count: 5, last24h: 3, last7d: 4, lastSeenAt: last.timestamp },
      { name: 'email.opened', count: 1, last24h: 0, last7d: 1, lastSeenAt: opened.toISOString() },
      { name: 'paid', count: 1, last24h: 1, last7d: 1, lastSeenAt: paid.timestamp },
    ],
  });
  // The fixed paths are not taken for event names.
  expect((await get(p, '/events/names')).body.names.map((n: { name: string }) => n.name)).toEqual(['email.opened', 'paid', 'signup']);
});

test('GET /events/:eventName/usage: workflow triggers, WAIT_FOR_EVENT steps and CONDITION steps on event.<name>', async () => {
  const onboarding = await workflow(project, 'Onboarding', 'signup');
  const billing = await workflow(project, 'Billing', 'paid');
  const wait = await step(project, billing.id, { type: 'WAIT_FOR_EVENT', name: 'Wait for signup', config: { eventName: 'signup', timeout: 600 } });
  const cond = await step(project, billing.id, { type: 'CONDITION', config: { field: 'event.signup', operator: 'triggered' } });
  await step(project, billing.id, { type: 'CONDITION', config: { field: 'event.paid', operator: 'notTriggered' } });
  const confirm = await step(project, onboarding.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'signup_confirmed' } });
  await workflow(other, 'Elsewhere', 'signup');

  // Enabled state is reported as it is (trigger → wait is a valid graph).
  await post(project, `/workflows/${onboarding.id}/transitions`, { fromStepId: onboarding.steps[0]!.id, toStepId: confirm.id }).expect(201);
  const enable = await env.http().patch(`/workflows/${onboarding.id}`).set(bearer(project.secretKey)).send({ enabled: true });
  expect(enable.status).toBe(200);

  const res = await get(project, '/events/signup/usage');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    eventName: 'signup',
    workflowTriggers: [{ workflowId: onboarding.id, workflowName: 'Onboarding', enabled: true }],
    waitForEventSteps: [{ workflowId: billing.id, workflowName: 'Billing', stepId: wait.id, stepName: 'Wait for signup' }],
    conditionSteps: [{ workflowId: billing.id, workflowName: 'Billing', stepId: cond.id, stepName: null, field: 'event.signup', operator: 'triggered' }],
    segments: [],
    campaigns: [],
  });

  expect((await get(project, '/events/never.seen/usage')).body).toEqual({
    eventName: 'never.seen',
    workflowTriggers: [],
    waitForEventSteps: [],
    conditionSteps: [],
    segments: [],
    campaigns: [],
  });
  // "contact" is an event name here, not the contact route.
  const contact = await get(project, '/events/contact/usage');
  expect({ status: contact.status, eventName: contact.body.eventName }).toEqual({ status: 200, eventName: 'contact' });
  // Reserved names can be looked up too.
  expect((await get(project, '/events/email.opened/usage')).body.workflowTriggers).toEqual([]);
});

test('DELETE /events/:eventName removes every event of the name in the project, reserved names included', async () => {
  const p = await env.project('events delete');
  const a = await track(p, 'ann@example.org', 'signup');
  await track(p, 'bob@example.org', 'signup');
  await track(p, 'ann@example.org', 'paid');
  await track(other, 'ann@example.org', 'signup');
  await insertEvent(p, 'evt_del_opened', a.contact, 'email.opened', new Date());
  const otherBefore = (await get(other, '/events/names')).body.names.find((n: { name: string }) => n.name === 'signup').count as number;

  const res = await del(p, '/events/signup');
  expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { name: 'signup', deleted: 2 } });
  expect((await get(p, '/events/names')).body.names.map((n: { name: string }) => n.name)).toEqual(['email.opened', 'paid']);
  expect((await get(p, '/events')).body.data.map((e: { name: string }) => e.name)).toEqual(['email.opened', 'paid']);
  expect((await get(other, '/events/names')).body.names.find((n: { name: string }) => n.name === 'signup').count).toBe(otherBefore);

  expect((await del(p, '/events/email.opened')).body).toEqual({ name: 'email.opened', deleted: 1 });
  expect((await del(p, '/events/signup')).body).toEqual({ name: 'signup', deleted: 0 });
  expect((await get(p, '/events/stats')).body).toEqual({
    total: 1,
    last24h: 1,
    last7d: 1,
    byName: [{ name: 'paid', count: 1, last24h: 1, last7d: 1, lastSeenAt: expect.any(String) }],
  });

  // More than one batch of 5,000.
  await query(
    env.orm.em.fork(),
    `insert into events (id, project_id, contact_id, name) select 'evt_bulk_' || g, ?, ?, 'bulk' from generate_series(1, 5003) g`,
    [p.id, a.contact],
  );
  expect((await del(p, '/events/bulk')).body).toEqual({ name: 'bulk', deleted: 5003 });
  expect((await get(p, '/events/stats')).body.total).toBe(1);
});
