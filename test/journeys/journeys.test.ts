import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney, eventDispatched, getExecution, listExecutions, track, waitForExecution } from '../helpers/journeys';
import { deliveriesSettled, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

// One journey minute lasts 60 ms here; a WAIT_FOR_EVENT timeout of 60 s lasts 1 s.
const TIME_SCALE = 1 / 1000;
const DOMAIN = 'journeys.test';

let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let project: ProjectWithKeys;
let welcomeId: string;
let nudgeId: string;

async function template(name: string, subject: string, body: string, type = 'TRANSACTIONAL') {
  const res = await env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({ name, subject, body, from: `hello@${DOMAIN}`, type });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const messagesTo = (address: string) => smtp.messages.filter((m) => m.envelope.to.includes(address));

beforeAll(async () => {
  sending = await startSendingEnv({ JOURNEY_TIME_SCALE: String(TIME_SCALE) });
  ({ env, smtp } = sending);
  project = await env.project('journeys');
  await sending.verifiedDomain(project, DOMAIN);
  welcomeId = await template('welcome', 'Welcome {{plan ?? "friend"}}', '<p>Hi {{email}}, plan {{plan}}</p>');
  nudgeId = await template('nudge', 'Still there?', '<p>Activate now</p>');
});

afterAll(() => sending.close());

test('signup → wait for activated (timeout) → condition → email: the nudge arrives when not activated', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'signup',
    steps: [
      { key: 'welcome', type: 'SEND_EMAIL', config: { templateId: welcomeId } },
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'activated', timeout: 2000 } },
      { key: 'check', type: 'CONDITION', config: { field: 'data.plan', operator: 'equals', value: 'pro' } },
      { key: 'nudge', type: 'SEND_EMAIL', config: { templateId: nudgeId } },
      { key: 'done', type: 'EXIT', config: { reason: 'activated' } },
    ],
    transitions: [
      ['trigger', 'welcome'],
      ['welcome', 'wait'],
      ['wait', 'done', 'event'],
      ['wait', 'check', 'timeout'],
      ['check', 'nudge', 'yes'],
      ['check', 'done', 'no'],
    ],
  });

  // Not activated: the wait times out, plan is pro → nudge.
  const lazy = await track(env, project, 'lazy@example.org', 'signup', { plan: 'pro' });
  const lazyRun = await waitForExecution(env, project, wf.id, lazy.contact, ['COMPLETED'], 30_000);
  expect(lazyRun.steps!.map((s) => [s.stepType, s.branch])).toEqual([
    ['SEND_EMAIL', null],
    ['WAIT_FOR_EVENT', 'timeout'],
    ['CONDITION', 'yes'],
    ['SEND_EMAIL', null],
  ]);
  expect(lazyRun.context).toEqual({ plan: 'pro' });
  // The journey does not wait for delivery: the second mail may still be on its way.
  await waitUntil(async () => messagesTo('lazy@example.org').length >= 2);
  const lazyMail = await Promise.all(messagesTo('lazy@example.org').map((m) => simpleParser(m.raw)));
  expect(lazyMail.map((m) => m.subject).sort()).toEqual(['Still there?', 'Welcome pro']);

  // Activated during the wait: the event branch, its data merged into the context, EXITED.
  const eager = await track(env, project, 'eager@example.org', 'signup', { plan: 'pro' });
  await waitForExecution(env, project, wf.id, eager.contact, ['WAITING']);
  await waitUntil(async () => (await getExecution(env, project, wf.id, (await listExecutions(env, project, wf.id)).find((e) => e.contactId === eager.contact)!.id)).waitingForEvent === 'activated');
  await track(env, project, 'eager@example.org', 'activated', { source: 'app' });
  const eagerRun = await waitForExecution(env, project, wf.id, eager.contact, ['EXITED']);
  expect(eagerRun.exitReason).toBe('activated');
  expect(eagerRun.context).toEqual({ plan: 'pro', source: 'app' });
  expect(eagerRun.steps!.map((s) => [s.stepType, s.branch])).toEqual([
    ['SEND_EMAIL', null],
    ['WAIT_FOR_EVENT', 'event'],
    ['EXIT', null],
  ]);
  // The execution has ended and its emails are out: all this contact will ever get is there.
  await deliveriesSettled(env, 'contact_id = ?', [eager.contact]);
  expect(messagesTo('eager@example.org')).toHaveLength(1);
});

test('an event tracked before the wait began does not end it', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'early-start',
    steps: [
      { key: 'delay', type: 'DELAY', config: { amount: 10, unit: 'minutes' } }, // 600 ms here
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'early-done', timeout: 1500 } },
    ],
    transitions: [
      ['trigger', 'delay'],
      ['delay', 'wait'],
    ],
  });
  const t = await track(env, project, 'early@example.org', 'early-start');
  await waitForExecution(env, project, wf.id, t.contact, ['WAITING']);
  await track(env, project, 'early@example.org', 'early-done'); // during the DELAY
  const run = await waitForExecution(env, project, wf.id, t.contact, ['COMPLETED'], 20_000);
  expect(run.steps!.map((s) => [s.stepType, s.branch])).toEqual([
    ['DELAY', null],
    ['WAIT_FOR_EVENT', 'timeout'],
  ]);
});

test('UPDATE_CONTACT applies the data rules and the subscription; CONDITION no-branch', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'upgrade',
    steps: [
      { key: 'update', type: 'UPDATE_CONTACT', config: { updates: { tier: 'gold', old: null, keep: '' }, subscribed: false } },
      { key: 'check', type: 'CONDITION', config: { field: 'data.tier', operator: 'equals', value: 'silver' } },
      { key: 'yes', type: 'EXIT', config: { reason: 'silver' } },
      { key: 'no', type: 'EXIT', config: { reason: 'not silver' } },
    ],
    transitions: [
      ['trigger', 'update'],
      ['update', 'check'],
      ['check', 'yes', 'yes'],
      ['check', 'no', 'no'],
    ],
  });
  const t = await track(env, project, 'upgrade@example.org', 'upgrade', { old: 1, keep: 'me' });
  const run = await waitForExecution(env, project, wf.id, t.contact, ['EXITED']);
  expect(run.exitReason).toBe('not silver');
  const contact = await env.http().get(`/contacts/${t.contact}`).set(bearer(project.secretKey));
  expect(contact.body.data).toEqual({ tier: 'gold', keep: 'me' });
  expect(contact.body.subscribed).toBe(false);
  const events = await env.http().get(`/events/contact/${t.contact}`).set(bearer(project.secretKey));
  expect(events.body.data.map((e: { name: string }) => e.name)).toContain('contact.unsubscribed');
});

test('allowReentry false: a contact enters once, ever; true: again once the first has ended', async () => {
  const once = await buildJourney(env, project, {
    eventName: 'reentry-once',
    steps: [{ key: 'exit', type: 'EXIT', config: {} }],
    transitions: [['trigger', 'exit']],
  });
  const again = await buildJourney(env, project, {
    eventName: 'reentry-again',
    allowReentry: true,
    steps: [{ key: 'delay', type: 'DELAY', config: { amount: 5, unit: 'minutes' } }],
    transitions: [['trigger', 'delay']],
  });
  const email = 'reentry@example.org';
  const first = await track(env, project, email, 'reentry-once');
  await waitForExecution(env, project, once.id, first.contact, ['EXITED']);
  const repeat = await track(env, project, email, 'reentry-once');
  await eventDispatched(env, repeat.event);
  expect(await listExecutions(env, project, once.id)).toHaveLength(1);

  await track(env, project, email, 'reentry-again');
  await track(env, project, email, 'reentry-again'); // while the first is active: no second one
  await waitForExecution(env, project, again.id, first.contact, ['COMPLETED']);
  expect(await listExecutions(env, project, again.id)).toHaveLength(1);
  await track(env, project, email, 'reentry-again');
  await waitUntil(async () => (await listExecutions(env, project, again.id, 'COMPLETED')).length === 2);
});

test('cancel while waiting, and cancel-all; nothing runs after a cancel', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'cancel-me',
    allowReentry: true,
    steps: [
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'never' } },
      { key: 'mail', type: 'SEND_EMAIL', config: { templateId: nudgeId } },
    ],
    transitions: [
      ['trigger', 'wait'],
      ['wait', 'mail'],
    ],
  });
  const auth = bearer(project.secretKey);
  const a = await track(env, project, 'cancel-a@example.org', 'cancel-me');
  const b = await track(env, project, 'cancel-b@example.org', 'cancel-me');
  const c = await track(env, project, 'cancel-c@example.org', 'cancel-me');
  const runA = await waitForExecution(env, project, wf.id, a.contact, ['WAITING']);
  const cancelled = await env.http().delete(`/workflows/${wf.id}/executions/${runA.id}`).set(auth);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.status).toBe('CANCELLED');
  expect((await env.http().delete(`/workflows/${wf.id}/executions/${runA.id}`).set(auth)).status).toBe(409);

  await waitForExecution(env, project, wf.id, b.contact, ['WAITING']);
  await waitForExecution(env, project, wf.id, c.contact, ['WAITING']);
  const all = await env.http().post(`/workflows/${wf.id}/executions/cancel-all`).set(auth);
  expect(all.body).toEqual({ cancelled: 2 });
  expect(await listExecutions(env, project, wf.id, 'CANCELLED')).toHaveLength(3);

  // The awaited event now reaches no one: no email, no step after the wait.
  // Its dispatch is over, and the execution is closed in Temporal, where a later step would run.
  const never = await track(env, project, 'cancel-a@example.org', 'never');
  await eventDispatched(env, never.event);
  // The cancel request is recorded at once; the workflow closes when the worker takes it.
  const handle = env.temporal.client.workflow.getHandle(`journey:${runA.id}`);
  const closedAs = await waitUntil(async () => {
    const status = (await handle.describe()).status.name;
    return status !== 'RUNNING' && status;
  }, { what: 'the cancelled execution closed in Temporal' });
  expect(closedAs).toBe('CANCELLED');
  await deliveriesSettled(env, 'contact_id = ?', [a.contact]);
  expect(messagesTo('cancel-a@example.org')).toHaveLength(0);
  const history = await getExecution(env, project, wf.id, runA.id);
  expect(history.steps!.map((s) => [s.stepType, s.status])).toEqual([['WAIT_FOR_EVENT', 'CANCELLED']]);
});

test('a running execution keeps the graph it started with after the workflow is edited', async () => {
  const auth = bearer(project.secretKey);
  const wf = await buildJourney(env, project, {
    eventName: 'edit-me',
    allowReentry: true,
    steps: [
      { key: 'delay', type: 'DELAY', config: { amount: 15, unit: 'minutes' } }, // 900 ms
      { key: 'exit', type: 'EXIT', config: { reason: 'original' } },
    ],
    transitions: [
      ['trigger', 'delay'],
      ['delay', 'exit'],
    ],
  });
  const t = await track(env, project, 'edit@example.org', 'edit-me');
  await waitForExecution(env, project, wf.id, t.contact, ['WAITING']);
  const patched = await env.http().patch(`/workflows/${wf.id}/steps/${wf.stepIds.exit}`).set(auth).send({ config: { reason: 'edited' } });
  expect(patched.status).toBe(200);
  const run = await waitForExecution(env, project, wf.id, t.contact, ['EXITED']);
  expect(run.exitReason).toBe('original');
  const second = await track(env, project, 'edit@example.org', 'edit-me');
  await waitUntil(async () => (await listExecutions(env, project, wf.id, 'EXITED')).some((e) => e.exitReason === 'edited'));
  expect(second.contact).toBe(t.contact);
});

test('manual start: enabled workflows only, the re-entry rule applies, context is the given one', async () => {
  const auth = bearer(project.secretKey);
  const wf = await buildJourney(env, project, {
    eventName: 'manual',
    steps: [{ key: 'exit', type: 'EXIT', config: {} }],
    transitions: [['trigger', 'exit']],
    enable: false,
  });
  const contact = await env.http().post('/contacts').set(auth).send({ email: 'manual@example.org' });
  const refused = await env.http().post(`/workflows/${wf.id}/executions`).set(auth).send({ contactId: contact.body.id });
  expect(refused.status).toBe(409);
  expect(refused.body.error.code).toBe('WORKFLOW_DISABLED');
  expect((await env.http().patch(`/workflows/${wf.id}`).set(auth).send({ enabled: true })).status).toBe(200);
  const started = await env
    .http()
    .post(`/workflows/${wf.id}/executions`)
    .set(auth)
    .send({ contactId: contact.body.id, context: { source: 'manual' } });
  expect(started.status).toBe(201);
  expect(started.body.context).toEqual({ source: 'manual' });
  await waitForExecution(env, project, wf.id, contact.body.id, ['EXITED']);
  const again = await env.http().post(`/workflows/${wf.id}/executions`).set(auth).send({ contactId: contact.body.id });
  expect(again.status).toBe(409);
  const unknown = await env.http().post(`/workflows/${wf.id}/executions`).set(auth).send({ contactId: 'cnt_nope' });
  expect(unknown.status).toBe(404);
});
