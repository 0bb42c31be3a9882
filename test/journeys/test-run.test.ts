import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney, type ExecutionView, eventDispatched, track } from '../helpers/journeys';
import { deliveriesSettled, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * Test runs (POST /workflows/:id/test-runs) on the real Temporal dev server, at real journey time
 * (JOURNEY_TIME_SCALE 1): only the test run's timeScale compresses it, so an hour at 3600 lasts a
 * second. Simulated events (POST …/executions/:executionId/events) reach the run and nothing else.
 */
const DOMAIN = 'test-runs.test';
const UI_URL = 'http://temporal-ui.test:8233';
const HOUR = 3600;
const DAY = 86_400;

interface TestRunView extends ExecutionView {
  workflowId: string;
  test: boolean;
  timeScale: number;
  startedAt: string;
  finishedAt: string | null;
  temporal: { workflowId: string; runId: string | null; url: string | null };
  steps?: (NonNullable<ExecutionView['steps']>[number] & { startedAt: string; finishedAt: string | null })[];
}

let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let project: ProjectWithKeys;
let templateId: string;

const auth = () => bearer(project.secretKey);
const messagesTo = (address: string) => smtp.messages.filter((m) => m.envelope.to.includes(address));

async function contact(email: string): Promise<string> {
  const res = await env.http().post('/contacts').set(auth()).send({ email });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const testRun = (workflowId: string, body: unknown) => env.http().post(`/workflows/${workflowId}/test-runs`).set(auth()).send(body as object);
const simulate = (workflowId: string, executionId: string, body: unknown) =>
  env.http().post(`/workflows/${workflowId}/executions/${executionId}/events`).set(auth()).send(body as object);

async function startTestRun(workflowId: string, body: Record<string, unknown>): Promise<TestRunView> {
  const res = await testRun(workflowId, body);
  expect(res.status).toBe(201);
  return res.body as TestRunView;
}

async function execution(workflowId: string, id: string): Promise<TestRunView> {
  const res = await env.http().get(`/workflows/${workflowId}/executions/${id}`).set(auth());
  expect(res.status).toBe(200);
  return res.body as TestRunView;
}

async function executions(workflowId: string, query = ''): Promise<TestRunView[]> {
  const res = await env.http().get(`/workflows/${workflowId}/executions${query}`).set(auth());
  expect(res.status).toBe(200);
  return res.body.data as TestRunView[];
}

const ended = (workflowId: string, id: string, timeoutMs = 20_000) =>
  waitUntil(
    async () => {
      const run = await execution(workflowId, id);
      return !['RUNNING', 'WAITING'].includes(run.status) && run;
    },
    { timeoutMs, what: `the end of execution ${id}` },
  );

/**
 * Resolves once the execution's workflow has started its `n`th timer: a WAIT_FOR_EVENT with a
 * timeout waits from then on, so an event simulated after this is one it takes.
 */
async function timerStarted(id: string, n = 1): Promise<void> {
  await waitUntil(
    async () => {
      const history = await env.temporal.client.workflow.getHandle(`journey:${id}`).fetchHistory();
      return (history.events ?? []).filter((e) => e.timerStartedEventAttributes).length >= n;
    },
    { what: `timer ${n} of ${id}` },
  );
}

const stepsOf = (run: TestRunView) => run.steps!.map((s) => [s.stepType, s.status, s.branch]);
const waitJourney = (eventName: string, waitFor: string, timeout = DAY) => ({
  eventName,
  steps: [
    { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: waitFor, timeout } },
    { key: 'got', type: 'EXIT', config: { reason: 'event' } },
    { key: 'late', type: 'EXIT', config: { reason: 'timeout' } },
  ],
  transitions: [
    ['trigger', 'wait'],
    ['wait', 'got', 'event'],
    ['wait', 'late', 'timeout'],
  ] as [string, string, string?][],
});

beforeAll(async () => {
  sending = await startSendingEnv({ TEMPORAL_UI_URL: UI_URL });
  ({ env, smtp } = sending);
  project = await env.project('test runs');
  await sending.verifiedDomain(project, DOMAIN);
  const res = await env.http().post('/templates').set(auth()).send({ name: 'hello', subject: 'Hello {{plan}}', body: '<p>Hi</p>', from: `hi@${DOMAIN}` });
  expect(res.status).toBe(201);
  templateId = res.body.id as string;
});

afterAll(() => sending?.close());

test('DELAY 1 hour → SEND_EMAIL runs to completion in about a second at timeScale 3600, and names its Temporal run', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'tr-delay',
    steps: [
      { key: 'delay', type: 'DELAY', config: { amount: 1, unit: 'hours' } },
      { key: 'send', type: 'SEND_EMAIL', config: { templateId } },
    ],
    transitions: [
      ['trigger', 'delay'],
      ['delay', 'send'],
    ],
  });
  const contactId = await contact('delay@example.org');
  const started = await startTestRun(wf.id, { contactId, timeScale: HOUR, context: { plan: 'pro' } });
  expect(started).toMatchObject({ workflowId: wf.id, contactId, status: 'WAITING', test: true, timeScale: HOUR, context: { plan: 'pro' } });

  // The Temporal run named is the one Temporal runs, and the link opens its history in the Web UI.
  const workflowId = `journey:${started.id}`;
  const { runId } = await env.temporal.client.workflow.getHandle(workflowId).describe();
  expect(started.temporal).toEqual({
    workflowId,
    runId,
    url: `${UI_URL}/namespaces/default/workflows/${encodeURIComponent(workflowId)}/${runId}/history`,
  });

  const run = await ended(wf.id, started.id, 15_000);
  expect(run.status).toBe('COMPLETED');
  expect(stepsOf(run)).toEqual([
    ['DELAY', 'COMPLETED', null],
    ['SEND_EMAIL', 'COMPLETED', null],
  ]);
  // Scaled, not skipped: the hour lasted a second.
  const delay = run.steps![0]!;
  const lasted = Date.parse(delay.finishedAt!) - Date.parse(delay.startedAt);
  expect(lasted).toBeGreaterThanOrEqual(900);
  expect(lasted).toBeLessThan(10_000);

  // Its mail goes the normal way.
  const emailId = (run.steps![1]!.output as { emailId: string }).emailId;
  await deliveriesSettled(env, 'id = ?', [emailId]);
  const mail = await Promise.all(messagesTo('delay@example.org').map((m) => simpleParser(m.raw)));
  expect(mail.map((m) => m.subject)).toEqual(['Hello pro']);
});

test('WAIT_FOR_EVENT with a 1-day timeout: a simulated event takes the event branch, and is recorded nowhere', async () => {
  const wf = await buildJourney(env, project, waitJourney('tr-wait', 'activated'));
  const contactId = await contact('wait-event@example.org');
  const run = await startTestRun(wf.id, { contactId, timeScale: HOUR }); // the day lasts 24 s
  expect(run).toMatchObject({ status: 'WAITING', waitingForEvent: 'activated' });
  await timerStarted(run.id);

  const res = await simulate(wf.id, run.id, { event: 'activated', data: { source: 'dashboard' } });
  expect([res.status, res.body]).toEqual([202, { delivered: true }]);
  const done = await ended(wf.id, run.id);
  expect([done.status, done.exitReason]).toEqual(['EXITED', 'event']);
  expect(done.context).toEqual({ source: 'dashboard' });
  expect(stepsOf(done)).toEqual([
    ['WAIT_FOR_EVENT', 'COMPLETED', 'event'],
    ['EXIT', 'COMPLETED', null],
  ]);

  // Not an event of the project: not listed, not in the activity, no journey started by it.
  const events = await env.http().get('/events').query({ name: 'activated' }).set(auth());
  expect([events.status, events.body.data]).toEqual([200, []]);
  const contactEvents = await env.http().get(`/events/contact/${contactId}`).set(auth());
  expect(contactEvents.body.data).toEqual([]);
  const activity = await env.http().get('/activity').query({ contactId }).set(auth());
  expect([activity.status, activity.body.data]).toEqual([200, []]);
});

test('the same wait without the event takes the timeout branch once the scaled day is over', async () => {
  const wf = await buildJourney(env, project, waitJourney('tr-timeout', 'activated'));
  const contactId = await contact('wait-timeout@example.org');
  const run = await startTestRun(wf.id, { contactId, timeScale: DAY }); // the day lasts a second
  const done = await ended(wf.id, run.id, 15_000);
  expect([done.status, done.exitReason]).toEqual(['EXITED', 'timeout']);
  expect(stepsOf(done)[0]).toEqual(['WAIT_FOR_EVENT', 'COMPLETED', 'timeout']);
});

test("a simulated email.opened without an emailId is about the run's own email, as the wait expects", async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'tr-opened',
    steps: [
      { key: 'send', type: 'SEND_EMAIL', config: { templateId } },
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'email.opened', timeout: 3 * DAY } },
      { key: 'got', type: 'EXIT', config: { reason: 'opened' } },
      { key: 'late', type: 'EXIT', config: { reason: 'not opened' } },
    ],
    transitions: [
      ['trigger', 'send'],
      ['send', 'wait'],
      ['wait', 'got', 'event'],
      ['wait', 'late', 'timeout'],
    ],
  });
  const contactId = await contact('opened@example.org');
  const run = await startTestRun(wf.id, { contactId, timeScale: HOUR }); // 72 s to open it
  const waiting = await waitUntil(async () => {
    const now = await execution(wf.id, run.id);
    return now.waitingForEvent === 'email.opened' && now;
  });
  const emailId = (waiting.steps![0]!.output as { emailId: string }).emailId;

  const res = await simulate(wf.id, run.id, { event: 'email.opened' });
  expect([res.status, res.body]).toEqual([202, { delivered: true }]);
  const done = await ended(wf.id, run.id);
  expect([done.status, done.exitReason]).toEqual(['EXITED', 'opened']);
  expect(done.context).toEqual({ emailId });
  // The email itself was not marked opened, and no email.opened was recorded.
  const email = await queryOne<{ opened_at: Date | null }>(env.orm.em.fork(), 'select opened_at from emails where id = ?', [emailId]);
  expect(email).toEqual({ opened_at: null });
  expect((await env.http().get('/events').query({ name: 'email.opened' }).set(auth())).body.data).toEqual([]);
});

test('a disabled workflow can be test-run; one whose graph is invalid answers 422 with the problems', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'tr-disabled',
    enable: false,
    steps: [
      { key: 'delay', type: 'DELAY', config: { amount: 1, unit: 'minutes' } },
      { key: 'bye', type: 'EXIT', config: { reason: 'done' } },
    ],
    transitions: [
      ['trigger', 'delay'],
      ['delay', 'bye'],
    ],
  });
  const contactId = await contact('disabled@example.org');
  const run = await startTestRun(wf.id, { contactId }); // default timeScale 60: the minute lasts a second
  expect(run.timeScale).toBe(60);
  const done = await ended(wf.id, run.id);
  expect([done.status, done.exitReason]).toEqual(['EXITED', 'done']);

  const broken = await buildJourney(env, project, {
    eventName: 'tr-broken',
    enable: false,
    steps: [{ key: 'lost', type: 'DELAY', config: { amount: 1, unit: 'minutes' } }],
    transitions: [],
  });
  const res = await testRun(broken.id, { contactId });
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(res.body.error.errors).toEqual(
    expect.arrayContaining([expect.objectContaining({ field: `steps.${broken.stepIds.lost}`, code: 'invalid_graph', message: expect.stringMatching(/not reachable/) })]),
  );
  expect(await executions(broken.id)).toEqual([]);
});

test('allowReentry=false: a test run is no entry, and the real trigger enters beside it; real executions are listed apart', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'tr-once',
    allowReentry: false,
    steps: [{ key: 'delay', type: 'DELAY', config: { amount: 1, unit: 'days' } }],
    transitions: [['trigger', 'delay']],
  });
  const contactId = await contact('once@example.org');
  // The first test run finishes (a day in a second); the second stays waiting (a day in a day).
  const first = await startTestRun(wf.id, { contactId, timeScale: DAY });
  expect((await ended(wf.id, first.id)).status).toBe('COMPLETED');
  const second = await startTestRun(wf.id, { contactId, timeScale: 1 });

  const tracked = await track(env, project, 'once@example.org', 'tr-once');
  await eventDispatched(env, tracked.event);
  const real = (await executions(wf.id, '?test=false'))[0]!;
  expect(real).toMatchObject({ contactId, status: 'WAITING', test: false, timeScale: 1 });
  // The dispatcher started it: no run id kept, and the link opens the workflow's one run.
  const workflowId = `journey:${real.id}`;
  expect(real.temporal).toEqual({ workflowId, runId: null, url: `${UI_URL}/namespaces/default/workflows/${encodeURIComponent(workflowId)}` });

  // A third test run goes beside the real execution, which goes on; the real entry still counts.
  const third = await startTestRun(wf.id, { contactId, timeScale: 1 });
  expect((await executions(wf.id, '?test=true')).map((e) => e.id).sort()).toEqual([first.id, second.id, third.id].sort());
  expect((await executions(wf.id)).map((e) => e.id).sort()).toEqual([first.id, second.id, third.id, real.id].sort());
  const again = await track(env, project, 'once@example.org', 'tr-once');
  await eventDispatched(env, again.event);
  expect(await executions(wf.id, '?test=false')).toHaveLength(1);
  expect((await execution(wf.id, real.id)).status).toBe('WAITING');

  // Only the real execution is activity.
  const activity = await env.http().get('/activity').query({ contactId, type: 'workflow.' }).set(auth());
  expect(activity.body.data.map((i: { data: { executionId: string } }) => i.data.executionId)).toEqual([real.id]);
  const stats = await env.http().get('/activity/stats').query({ contactId, type: 'workflow.' }).set(auth());
  expect([stats.body.total, stats.body.byType]).toEqual([1, [{ type: 'workflow.started', count: 1 }]]);
  const upcoming = (await env.http().get('/activity/upcoming').set(auth())).body.executions.map((x: { id: string }) => x.id);
  expect([upcoming.includes(real.id), upcoming.includes(third.id)]).toEqual([true, false]);

  // The events endpoint is for test runs only.
  const refused = await simulate(wf.id, real.id, { event: 'anything' });
  expect([refused.status, refused.body.error.code]).toEqual([409, 'NOT_A_TEST_RUN']);
  const over = await simulate(wf.id, first.id, { event: 'anything' });
  expect([over.status, over.body.error.code]).toEqual([409, 'EXECUTION_ENDED']);

  const cancelled = await env.http().post(`/workflows/${wf.id}/executions/cancel-all`).set(auth());
  expect(cancelled.body).toEqual({ cancelled: 3 });
});

test('bad requests answer in the error envelope', async () => {
  const wf = await buildJourney(env, project, waitJourney('tr-bad', 'activated'));
  const contactId = await contact('bad@example.org');
  const invalid = async (res: { status: number; body: { success: boolean; error: { code: string; errors?: { field: string }[] } } }, status: number, code: string, field?: string) => {
    expect([res.status, res.body.success, res.body.error.code]).toEqual([status, false, code]);
    if (field) expect(res.body.error.errors!.map((e) => e.field)).toContain(field);
  };

  await invalid(await testRun(wf.id, {}), 422, 'VALIDATION_ERROR', 'contactId');
  await invalid(await testRun(wf.id, { contactId, timeScale: 0 }), 422, 'VALIDATION_ERROR', 'timeScale');
  await invalid(await testRun(wf.id, { contactId, timeScale: DAY + 1 }), 422, 'VALIDATION_ERROR', 'timeScale');
  await invalid(await testRun(wf.id, { contactId, timeScale: 'fast' }), 422, 'VALIDATION_ERROR', 'timeScale');
  await invalid(await testRun(wf.id, { contactId, context: 'x' }), 422, 'VALIDATION_ERROR', 'context');
  await invalid(await testRun(wf.id, [contactId]), 422, 'VALIDATION_ERROR');
  await invalid(await env.http().post(`/workflows/${wf.id}/test-runs`).set(auth()).set('Content-Type', 'application/json').send('{"contactId":'), 400, 'VALIDATION_ERROR');
  await invalid(await testRun(wf.id, { contactId: 'cnt_nobody' }), 404, 'CONTACT_NOT_FOUND');
  await invalid(await testRun('wfl_nothing', { contactId }), 404, 'WORKFLOW_NOT_FOUND');
  await invalid(await env.http().get(`/workflows/${wf.id}/executions?test=maybe`).set(auth()), 422, 'VALIDATION_ERROR', 'query.test');

  const run = await startTestRun(wf.id, { contactId, timeScale: 1 });
  await invalid(await simulate(wf.id, run.id, {}), 422, 'VALIDATION_ERROR', 'event');
  await invalid(await simulate(wf.id, run.id, { event: '' }), 422, 'VALIDATION_ERROR', 'event');
  await invalid(await simulate(wf.id, run.id, { event: 'email.opend' }), 422, 'VALIDATION_ERROR', 'event');
  await invalid(await simulate(wf.id, run.id, { event: 'activated', data: [1] }), 422, 'VALIDATION_ERROR', 'data');
  await invalid(await simulate(wf.id, 'exe_nothing', { event: 'activated' }), 404, 'EXECUTION_NOT_FOUND');
  // Nothing of all that reached the run.
  expect(await execution(wf.id, run.id)).toMatchObject({ status: 'WAITING', context: {} });
  const cancelled = await env.http().delete(`/workflows/${wf.id}/executions/${run.id}`).set(auth());
  expect([cancelled.status, cancelled.body.status, cancelled.body.test]).toEqual([200, 'CANCELLED', true]);
});
