import type { ProjectWithKeys } from '../../db/projects/projects';
import { newId } from '../../db/ids';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/** Journey definitions through the API (`/workflows`), on the real database: CRUD, step configs, transitions, graph rules. */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

interface Step {
  id: string;
  type: string;
  name: string | null;
  config: Record<string, unknown>;
}
interface Transition {
  id: string;
  fromStepId: string;
  toStepId: string;
  branch: string | null;
}
interface Journey {
  id: string;
  name: string;
  description: string | null;
  triggerType: 'EVENT';
  triggerConfig: { eventName: string };
  enabled: boolean;
  allowReentry: boolean;
  createdAt: string;
  updatedAt: string;
  steps: Step[];
  transitions: Transition[];
}
type ErrorBody = { error?: { code?: string; message?: string; errors?: { field: string; message: string; code: string }[] } };

function as(p: ProjectWithKeys) {
  const auth = bearer(p.secretKey);
  const http = () => env.http();
  return {
    create: (body: object) => http().post('/workflows').set(auth).send(body),
    list: (q: Record<string, string | number> = {}) => http().get('/workflows').query(q).set(auth),
    get: (id: string) => http().get(`/workflows/${id}`).set(auth),
    patch: (id: string, body: object) => http().patch(`/workflows/${id}`).set(auth).send(body),
    remove: (id: string) => http().delete(`/workflows/${id}`).set(auth),
    addStep: (id: string, body: object) => http().post(`/workflows/${id}/steps`).set(auth).send(body),
    patchStep: (id: string, stepId: string, body: object) => http().patch(`/workflows/${id}/steps/${stepId}`).set(auth).send(body),
    removeStep: (id: string, stepId: string, splice?: boolean) =>
      http()
        .delete(`/workflows/${id}/steps/${stepId}`)
        .query(splice === undefined ? {} : { splice: String(splice) })
        .set(auth),
    connect: (id: string, body: object) => http().post(`/workflows/${id}/transitions`).set(auth).send(body),
    disconnect: (id: string, transitionId: string) => http().delete(`/workflows/${id}/transitions/${transitionId}`).set(auth),
    fields: () => http().get('/workflows/fields').set(auth),
    createTemplate: (name: string) => http().post('/templates').set(auth).send({ name, subject: 'Hi', body: '<p>Hi</p>' }),
    templateUsage: (id: string) => http().get(`/templates/${id}/usage`).set(auth),
  };
}

function expectError(res: { status: number; body: ErrorBody }, status: number, code: string) {
  expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
}

/** The field-level errors, as [field, code] pairs sorted by field. */
const errorsOf = (res: { body: ErrorBody }) =>
  (res.body.error?.errors ?? []).map((e) => [e.field, e.code] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

async function createJourney(p: ProjectWithKeys, body: object = { name: 'Onboarding', eventName: 'signup' }): Promise<Journey> {
  const res = await as(p).create(body);
  expect(res.status).toBe(201);
  return res.body as Journey;
}

async function addStep(p: ProjectWithKeys, journeyId: string, body: object): Promise<Step> {
  const res = await as(p).addStep(journeyId, body);
  expect({ status: res.status, body: res.body }).toEqual({ status: 201, body: expect.anything() });
  return res.body as Step;
}

async function connect(p: ProjectWithKeys, journeyId: string, fromStepId: string, toStepId: string, branch?: string): Promise<Transition> {
  const res = await as(p).connect(journeyId, { fromStepId, toStepId, ...(branch ? { branch } : {}) });
  expect({ status: res.status, body: res.body }).toEqual({ status: 201, body: expect.anything() });
  return res.body as Transition;
}

const trigger = (w: Journey) => w.steps.find((s) => s.type === 'TRIGGER')!;

let templateId: string;
let otherTemplateId: string;

beforeAll(async () => {
  env = await startTestEnv();
  [project, other] = await Promise.all([env.project('workflows A'), env.project('workflows B')]);
  const [t, o] = await Promise.all([as(project).createTemplate('Welcome'), as(other).createTemplate('Other')]);
  expect([t.status, o.status]).toEqual([201, 201]);
  templateId = t.body.id;
  otherTemplateId = o.body.id;
});

afterAll(() => env.close());

test('create returns the workflow, disabled, EVENT-triggered, with its TRIGGER step; get returns the same', async () => {
  const before = Date.now();
  const res = await as(project).create({ name: '  Onboarding ', description: 'New users', eventName: 'signup' });
  expect(res.status).toBe(201);
  const w = res.body as Journey;
  expect(w).toEqual({
    id: expect.stringMatching(/^wfl_[0-9a-f]{32}$/),
    name: 'Onboarding',
    description: 'New users',
    triggerType: 'EVENT',
    triggerConfig: { eventName: 'signup' },
    enabled: false,
    allowReentry: false,
    createdAt: expect.any(String),
    updatedAt: expect.any(String),
    steps: [{ id: expect.stringMatching(/^stp_[0-9a-f]{32}$/), type: 'TRIGGER', name: null, config: { eventName: 'signup' } }],
    transitions: [],
  });
  expect(new Date(w.createdAt).getTime()).toBeGreaterThanOrEqual(before - 1000);
  expect(w.updatedAt).toBe(w.createdAt);
  expect((await as(project).get(w.id)).body).toEqual(w);

  // Sent values that the API fixes are not taken from the body.
  const fixed = await as(project).create({ name: 'Re', eventName: 'paid', allowReentry: true, enabled: true, triggerType: 'OTHER' });
  expect(fixed.status).toBe(201);
  expect({ enabled: fixed.body.enabled, triggerType: fixed.body.triggerType, allowReentry: fixed.body.allowReentry }).toEqual({
    enabled: false,
    triggerType: 'EVENT',
    allowReentry: true,
  });
});

test('create validates name and eventName', async () => {
  const res = await as(project).create({ name: ' ', eventName: '', allowReentry: 'yes' });
  expectError(res, 422, 'VALIDATION_ERROR');
  expect(errorsOf(res)).toEqual([
    ['allowReentry', 'invalid_type'],
    ['eventName', 'too_small'],
    ['name', 'too_small'],
  ]);
  expectError(await as(project).create({ name: 'x' }), 422, 'VALIDATION_ERROR');
});

test('list: newest first, cursor pages, total on the first page only; projects are isolated', async () => {
  const p = await env.project('workflows list');
  const created: Journey[] = [];
  for (const name of ['one', 'two', 'three']) created.push(await createJourney(p, { name, eventName: 'e' }));
  const first = await as(p).list({ limit: 2 });
  expect(first.status).toBe(200);
  const summary = (w: Journey) => {
    const { steps: _s, transitions: _t, ...rest } = w;
    return rest;
  };
  expect(first.body).toEqual({ data: [summary(created[2]!), summary(created[1]!)], cursor: expect.any(String), hasMore: true, total: 3 });
  const second = await as(p).list({ limit: 2, cursor: first.body.cursor });
  expect(second.body).toEqual({ data: [summary(created[0]!)], cursor: null, hasMore: false, total: 0 });

  expectError(await as(other).get(created[0]!.id), 404, 'WORKFLOW_NOT_FOUND');
  expectError(await as(other).patch(created[0]!.id, { name: 'x' }), 404, 'WORKFLOW_NOT_FOUND');
  expectError(await as(other).remove(created[0]!.id), 404, 'WORKFLOW_NOT_FOUND');
  expectError(await as(other).addStep(created[0]!.id, { type: 'EXIT', config: {} }), 404, 'WORKFLOW_NOT_FOUND');
  expect((await as(other).list()).body.data.map((w: Journey) => w.id)).not.toContain(created[0]!.id);
});

test('PATCH updates metadata, the trigger event (its TRIGGER step follows) and allowReentry', async () => {
  const w = await createJourney(project);
  const res = await as(project).patch(w.id, { name: 'Renamed', description: null, eventName: 'registered', allowReentry: true });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    ...w,
    name: 'Renamed',
    description: null,
    triggerConfig: { eventName: 'registered' },
    allowReentry: true,
    updatedAt: expect.any(String),
    steps: [{ ...trigger(w), config: { eventName: 'registered' } }],
  });
  expect(res.body.updatedAt > w.updatedAt).toBe(true);

  const viaConfig = await as(project).patch(w.id, { triggerType: 'EVENT', triggerConfig: { eventName: 'joined' } });
  expect(viaConfig.status).toBe(200);
  expect(viaConfig.body.triggerConfig).toEqual({ eventName: 'joined' });
  expect(viaConfig.body.steps[0].config).toEqual({ eventName: 'joined' });

  const disagree = await as(project).patch(w.id, { eventName: 'a', triggerConfig: { eventName: 'b' } });
  expectError(disagree, 422, 'VALIDATION_ERROR');
  expect(errorsOf(disagree)).toEqual([['triggerConfig.eventName', 'custom']]);
  expect(errorsOf(await as(project).patch(w.id, {}))).toEqual([['body', 'custom']]);
  expect(errorsOf(await as(project).patch(w.id, { triggerType: 'SEGMENT' }))).toEqual([['triggerType', 'invalid_value']]);
  expectError(await as(project).patch('wfl_missing', { name: 'x' }), 404, 'WORKFLOW_NOT_FOUND');
});

describe('steps', () => {
  test('one step of each type: configs validated, stored with their defaults', async () => {
    const w = await createJourney(project);
    const cases: [object, object][] = [
      [{ type: 'SEND_EMAIL', name: 'Welcome mail', config: { templateId } }, { templateId, recipient: { type: 'CONTACT' } }],
      [
        { type: 'SEND_EMAIL', config: { templateId, recipient: { type: 'CUSTOM', customEmail: 'ops@example.org' } } },
        { templateId, recipient: { type: 'CUSTOM', customEmail: 'ops@example.org' } },
      ],
      [{ type: 'DELAY', config: { amount: 365, unit: 'days' } }, { amount: 365, unit: 'days' }],
      [{ type: 'WAIT_FOR_EVENT', config: { eventName: 'paid', timeout: 3600 } }, { eventName: 'paid', timeout: 3600 }],
      [{ type: 'CONDITION', config: { field: 'data.plan', operator: 'equals', value: 'pro' } }, { field: 'data.plan', operator: 'equals', value: 'pro' }],
      [{ type: 'CONDITION', config: { field: 'event.paid', operator: 'triggeredWithin', value: 3, unit: 'days' } }, { field: 'event.paid', operator: 'triggeredWithin', value: 3, unit: 'days' }],
      [{ type: 'WEBHOOK', config: { url: 'https://hooks.example.org/{{id}}' } }, { url: 'https://hooks.example.org/{{id}}', method: 'POST' }],
      [{ type: 'UPDATE_CONTACT', config: { updates: { stage: 'active' }, subscribed: true } }, { updates: { stage: 'active' }, subscribed: true }],
      [{ type: 'EXIT', config: {} }, {}],
    ];
    for (const [body, config] of cases) {
      const step = await addStep(project, w.id, body);
      expect(step).toEqual({
        id: expect.stringMatching(/^stp_/),
        type: (body as { type: string }).type,
        name: (body as { name?: string }).name ?? null,
        config,
      });
    }
    const got = (await as(project).get(w.id)).body as Journey;
    expect(got.steps.map((s) => s.type)).toEqual([
      'TRIGGER',
      'SEND_EMAIL',
      'SEND_EMAIL',
      'DELAY',
      'WAIT_FOR_EVENT',
      'CONDITION',
      'CONDITION',
      'WEBHOOK',
      'UPDATE_CONTACT',
      'EXIT',
    ]);
    expect(got.updatedAt > w.updatedAt).toBe(true);
  });

  test('invalid configs are refused per type, with config.<key> fields', async () => {
    const w = await createJourney(project);
    const cases: [object, [string, string][]][] = [
      [{ type: 'SEND_EMAIL', config: {} }, [['config.templateId', 'invalid_type']]],
      [
        { type: 'SEND_EMAIL', config: { templateId, recipient: { type: 'CUSTOM', customEmail: 'nope' } } },
        [['config.recipient.customEmail', 'invalid_string']],
      ],
      [{ type: 'DELAY', config: { amount: 0, unit: 'weeks' } }, [['config.amount', 'too_small'], ['config.unit', 'invalid_value']]],
      [{ type: 'DELAY', config: { amount: 366, unit: 'days' } }, [['config.amount', 'custom']]],
      [{ type: 'DELAY', config: { amount: 1.5, unit: 'hours' } }, [['config.amount', 'invalid_type']]],
      [{ type: 'WAIT_FOR_EVENT', config: { eventName: '', timeout: -5 } }, [['config.eventName', 'too_small'], ['config.timeout', 'too_small']]],
      [{ type: 'CONDITION', config: { field: 'plan', operator: 'equals' } }, [['config.field', 'invalid_string'], ['config.value', 'custom']]],
      [{ type: 'CONDITION', config: { field: 'data.plan', operator: 'near', value: 1 } }, [['config.operator', 'invalid_value']]],
      [{ type: 'WEBHOOK', config: { method: 'TRACE' } }, [['config.method', 'invalid_value'], ['config.url', 'invalid_type']]],
      [{ type: 'UPDATE_CONTACT', config: {} }, [['config', 'custom']]],
      [{ type: 'EXIT', config: { reason: 'r'.repeat(501) } }, [['config.reason', 'too_big']]],
      [{ type: 'EXIT' }, [['config', 'invalid_type']]],
      [{ type: 'DELAY', name: '', config: { amount: 1, unit: 'days' } }, [['name', 'too_small']]],
      [{ type: 'TELEPORT', config: {} }, [['type', 'invalid_union']]],
    ];
    for (const [body, errors] of cases) {
      const res = await as(project).addStep(w.id, body);
      expectError(res, 422, 'VALIDATION_ERROR');
      expect({ body, errors: errorsOf(res) }).toEqual({ body, errors });
    }
    const msg = await as(project).addStep(w.id, { type: 'UPDATE_CONTACT', config: {} });
    expect(msg.body.error.errors).toEqual([{ field: 'config', message: 'Give updates and/or subscribed', code: 'custom' }]);
    const delay = await as(project).addStep(w.id, { type: 'DELAY', config: { amount: 366, unit: 'days' } });
    expect(delay.body.error.errors).toEqual([{ field: 'config.amount', message: 'A delay is at most 365 days', code: 'custom' }]);

    const triggerStep = await as(project).addStep(w.id, { type: 'TRIGGER', config: { eventName: 'x' } });
    expect(triggerStep.body.error.errors).toEqual([
      {
        field: 'type',
        message: 'The TRIGGER step is created with the workflow; add one of SEND_EMAIL, DELAY, WAIT_FOR_EVENT, CONDITION, WEBHOOK, UPDATE_CONTACT, EXIT',
        code: 'invalid_union',
      },
    ]);
    // Nothing was added.
    expect((await as(project).get(w.id)).body.steps).toHaveLength(1);
  });

  test("a SEND_EMAIL template must be one of the project's", async () => {
    const w = await createJourney(project);
    for (const id of ['tpl_missing', otherTemplateId]) {
      const res = await as(project).addStep(w.id, { type: 'SEND_EMAIL', config: { templateId: id } });
      expectError(res, 422, 'VALIDATION_ERROR');
      expect(res.body.error.errors).toEqual([{ field: 'config.templateId', message: `No template ${id} in this project`, code: 'template_not_found' }]);
    }
    expect((await as(project).get(w.id)).body.steps).toHaveLength(1);
  });

  test('PATCH a step: rename, replace the config (validated for its type); the TRIGGER config is refused', async () => {
    const w = await createJourney(project);
    const delay = await addStep(project, w.id, { type: 'DELAY', name: 'Wait', config: { amount: 2, unit: 'hours' } });

    const renamed = await as(project).patchStep(w.id, delay.id, { name: 'Pause' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ ...delay, name: 'Pause' });

    const replaced = await as(project).patchStep(w.id, delay.id, { config: { amount: 3, unit: 'days' } });
    expect(replaced.body).toEqual({ ...delay, name: 'Pause', config: { amount: 3, unit: 'days' } });

    const bad = await as(project).patchStep(w.id, delay.id, { config: { amount: 3 } });
    expectError(bad, 422, 'VALIDATION_ERROR');
    expect(errorsOf(bad)).toEqual([['config.unit', 'invalid_value']]);
    // A config of another type is judged by this step's type.
    expect(errorsOf(await as(project).patchStep(w.id, delay.id, { config: { templateId } }))).toEqual([
      ['config.amount', 'invalid_type'],
      ['config.unit', 'invalid_value'],
    ]);
    expect(errorsOf(await as(project).patchStep(w.id, delay.id, {}))).toEqual([['body', 'custom']]);

    const send = await addStep(project, w.id, { type: 'SEND_EMAIL', config: { templateId } });
    const foreign = await as(project).patchStep(w.id, send.id, { config: { templateId: otherTemplateId } });
    expect(foreign.body.error.errors).toEqual([
      { field: 'config.templateId', message: `No template ${otherTemplateId} in this project`, code: 'template_not_found' },
    ]);

    const t = trigger(w);
    const trig = await as(project).patchStep(w.id, t.id, { config: { eventName: 'other' } });
    expectError(trig, 422, 'VALIDATION_ERROR');
    expect(trig.body.error.errors).toEqual([
      { field: 'config', message: `Change the event with PATCH /workflows/${w.id} {"eventName": "..."}`, code: 'trigger_config' },
    ]);
    const trigName = await as(project).patchStep(w.id, t.id, { name: 'Start' });
    expect(trigName.body).toEqual({ ...t, name: 'Start' });

    expect((await as(project).get(w.id)).body.steps).toEqual([{ ...t, name: 'Start' }, { ...delay, name: 'Pause', config: { amount: 3, unit: 'days' } }, send]);

    expectError(await as(project).patchStep(w.id, 'stp_missing', { name: 'x' }), 404, 'WORKFLOW_STEP_NOT_FOUND');
    expectError(await as(project).patchStep(w.id, 'stp_missing', { config: {} }), 404, 'WORKFLOW_STEP_NOT_FOUND');
    const w2 = await createJourney(project);
    expectError(await as(project).patchStep(w2.id, delay.id, { name: 'x' }), 404, 'WORKFLOW_STEP_NOT_FOUND');
    expectError(await as(project).patchStep(w2.id, delay.id, { config: { amount: 1, unit: 'days' } }), 404, 'WORKFLOW_STEP_NOT_FOUND');
    expectError(await as(project).removeStep(w2.id, delay.id), 404, 'WORKFLOW_STEP_NOT_FOUND');
  });
});

describe('transitions', () => {
  test('rules on branches, sources and targets; one transition per branch', async () => {
    const w = await createJourney(project);
    const t = trigger(w);
    const cond = await addStep(project, w.id, { type: 'CONDITION', config: { field: 'contact.subscribed', operator: 'equals', value: true } });
    const send = await addStep(project, w.id, { type: 'SEND_EMAIL', config: { templateId } });
    const exit = await addStep(project, w.id, { type: 'EXIT', config: {} });
    const wait = await addStep(project, w.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'paid' } });

    const first = await as(project).connect(w.id, { fromStepId: t.id, toStepId: cond.id });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ id: expect.stringMatching(/^trn_[0-9a-f]{32}$/), fromStepId: t.id, toStepId: cond.id, branch: null });

    const rule = async (body: object, status: number, errors: { field: string; message: string; code: string }[] | string) => {
      const res = await as(project).connect(w.id, body);
      if (typeof errors === 'string') {
        expectError(res, status, 'CONFLICT');
        expect(res.body.error.message).toBe(errors);
      } else {
        expectError(res, status, 'VALIDATION_ERROR');
        expect(res.body.error.errors).toEqual(errors);
      }
    };
    await rule({ fromStepId: cond.id, toStepId: send.id }, 422, [
      { field: 'branch', message: 'A transition from a CONDITION step needs branch "yes" or "no"', code: 'invalid_branch' },
    ]);
    await rule({ fromStepId: cond.id, toStepId: send.id, branch: 'maybe' }, 422, [
      { field: 'branch', message: 'Invalid option: expected one of "yes"|"no"|"event"|"timeout"', code: 'invalid_value' },
    ]);
    const yes = await connect(project, w.id, cond.id, send.id, 'yes');
    expect(yes.branch).toBe('yes');
    await rule(
      { fromStepId: cond.id, toStepId: exit.id, branch: 'yes' },
      409,
      `Step ${cond.id} already has a "yes" transition (${yes.id}, to ${send.id}); one transition per branch`,
    );
    await connect(project, w.id, cond.id, exit.id, 'no');
    await rule({ fromStepId: send.id, toStepId: exit.id, branch: 'yes' }, 422, [
      { field: 'branch', message: 'A transition from a SEND_EMAIL step carries no branch', code: 'invalid_branch' },
    ]);
    await rule({ fromStepId: exit.id, toStepId: send.id }, 422, [
      { field: 'fromStepId', message: 'An EXIT step ends the execution; it cannot have outgoing transitions', code: 'invalid_transition' },
    ]);
    await rule({ fromStepId: send.id, toStepId: t.id }, 422, [
      { field: 'toStepId', message: 'The TRIGGER step is the entry of the workflow; no transition may lead to it', code: 'invalid_transition' },
    ]);
    await rule(
      { fromStepId: t.id, toStepId: send.id },
      409,
      `Step ${t.id} already has an unlabelled transition (${first.body.id}, to ${cond.id}); one transition per branch`,
    );
    await rule({ fromStepId: wait.id, toStepId: exit.id, branch: 'timeout' }, 422, [
      {
        field: 'branch',
        message: `Step ${wait.id} waits without a timeout, so a "timeout" branch could never be taken; set its config.timeout first`,
        code: 'invalid_branch',
      },
    ]);
    const onEvent = await connect(project, w.id, wait.id, send.id, 'event');
    await rule(
      { fromStepId: wait.id, toStepId: exit.id },
      409,
      `Step ${wait.id} already has an "event" transition (${onEvent.id}); an unlabelled one would be taken on the same outcome`,
    );

    // Steps of another journey, or none at all.
    const w2 = await createJourney(project);
    await rule({ fromStepId: send.id, toStepId: trigger(w2).id }, 422, [
      { field: 'toStepId', message: `No step ${trigger(w2).id} in workflow ${w.id}`, code: 'step_not_found' },
    ]);
    await rule({ fromStepId: 'stp_x', toStepId: 'stp_y' }, 422, [
      { field: 'fromStepId', message: `No step stp_x in workflow ${w.id}`, code: 'step_not_found' },
      { field: 'toStepId', message: `No step stp_y in workflow ${w.id}`, code: 'step_not_found' },
    ]);
    expectError(await as(other).connect(w.id, { fromStepId: send.id, toStepId: exit.id }), 404, 'WORKFLOW_NOT_FOUND');

    // Delete one; then it is gone.
    const del = await as(project).disconnect(w.id, yes.id);
    expect({ status: del.status, body: del.body }).toEqual({ status: 200, body: { id: yes.id, deleted: true } });
    expectError(await as(project).disconnect(w.id, yes.id), 404, 'WORKFLOW_TRANSITION_NOT_FOUND');
    expectError(await as(project).disconnect(w2.id, first.body.id), 404, 'WORKFLOW_TRANSITION_NOT_FOUND');
    const got = (await as(project).get(w.id)).body as Journey;
    expect(got.transitions.map((x) => [x.fromStepId, x.toStepId, x.branch])).toEqual([
      [t.id, cond.id, null],
      [cond.id, exit.id, 'no'],
      [wait.id, send.id, 'event'],
    ]);
  });
});

describe('enabling validates the graph', () => {
  test('an invalid graph is refused with one error per problem; fixed, it enables', async () => {
    const w = await createJourney(project, { name: 'Graph', eventName: 'signup' });
    const t = trigger(w);
    const send = await addStep(project, w.id, { type: 'SEND_EMAIL', name: 'Hello', config: { templateId } });
    const cond = await addStep(project, w.id, { type: 'CONDITION', name: 'Paid?', config: { field: 'event.paid', operator: 'triggered' } });
    const orphan = await addStep(project, w.id, { type: 'WEBHOOK', config: { url: 'https://hooks.example.org/x' } });
    await connect(project, w.id, t.id, send.id);
    await connect(project, w.id, send.id, cond.id);
    await connect(project, w.id, cond.id, send.id, 'no');

    const res = await as(project).patch(w.id, { enabled: true, name: 'Graph v2' });
    expectError(res, 422, 'VALIDATION_ERROR');
    const d = (s: Step) => `${s.type} step "${s.name}" (${s.id})`;
    const dt = `TRIGGER step ${t.id}`;
    const never = (who: string, within: string) =>
      `${who} can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within ${within})`;
    expect(res.body.error.errors).toEqual([
      { field: `steps.${cond.id}`, message: `${d(cond)} needs both a "yes" and a "no" transition; missing: "yes"`, code: 'invalid_graph' },
      { field: `steps.${orphan.id}`, message: `WEBHOOK step ${orphan.id} is not reachable from the trigger; connect a transition to it or delete it`, code: 'invalid_graph' },
      { field: `steps.${t.id}`, message: never(dt, `${dt}, ${d(send)}, ${d(cond)}`), code: 'invalid_graph' },
      { field: `steps.${send.id}`, message: never(d(send), `${d(send)}, ${d(cond)}`), code: 'invalid_graph' },
      { field: `steps.${cond.id}`, message: never(d(cond), `${d(send)}, ${d(cond)}`), code: 'invalid_graph' },
      {
        field: 'graph',
        message: `Loop without a DELAY or WAIT_FOR_EVENT step: ${d(send)} → ${d(cond)} → ${d(send)}; an execution would repeat it without pause. Add a DELAY or WAIT_FOR_EVENT step to it`,
        code: 'invalid_graph',
      },
    ]);
    expect(res.body.error.message).toMatch(/^The workflow cannot be enabled: its graph has 6 problems: steps\./);
    // Nothing of the PATCH was applied.
    const unchanged = (await as(project).get(w.id)).body as Journey;
    expect({ enabled: unchanged.enabled, name: unchanged.name }).toEqual({ enabled: false, name: 'Graph' });

    const exit = await addStep(project, w.id, { type: 'EXIT', config: { reason: 'paid' } });
    await connect(project, w.id, cond.id, exit.id, 'yes');
    expect((await as(project).removeStep(w.id, orphan.id)).status).toBe(200);
    const stillLoops = await as(project).patch(w.id, { enabled: true });
    expect(errorsOf(stillLoops)).toEqual([['graph', 'invalid_graph']]);

    // A DELAY in the loop: the graph is valid.
    const noTransition = (await as(project).get(w.id)).body.transitions.find((x: Transition) => x.branch === 'no') as Transition;
    expect((await as(project).disconnect(w.id, noTransition.id)).status).toBe(200);
    const delay = await addStep(project, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    await connect(project, w.id, cond.id, delay.id, 'no');
    await connect(project, w.id, delay.id, send.id);
    const enabled = await as(project).patch(w.id, { enabled: true });
    expect(enabled.status).toBe(200);
    expect(enabled.body.enabled).toBe(true);
  });

  test('a SEND_EMAIL step whose template was deleted since blocks enabling', async () => {
    const tpl = await as(project).createTemplate('Soon gone');
    const w = await createJourney(project);
    const send = await addStep(project, w.id, { type: 'SEND_EMAIL', name: 'Mail', config: { templateId: tpl.body.id } });
    await connect(project, w.id, trigger(w).id, send.id);
    expect((await env.http().delete(`/templates/${tpl.body.id}`).set(bearer(project.secretKey))).status).toBe(200);
    const res = await as(project).patch(w.id, { enabled: true });
    expectError(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([
      {
        field: `steps.${send.id}`,
        message: `SEND_EMAIL step "Mail" (${send.id}) uses template ${tpl.body.id}, which no longer exists; choose another template`,
        code: 'invalid_graph',
      },
    ]);
    expect((await as(project).patchStep(w.id, send.id, { config: { templateId } })).status).toBe(200);
    expect((await as(project).patch(w.id, { enabled: true })).body.enabled).toBe(true);
  });

  test('edits of an enabled workflow are kept only if the graph stays valid', async () => {
    const w = await createJourney(project, { name: 'Live', eventName: 'signup' });
    const t = trigger(w);
    const wait = await addStep(project, w.id, { type: 'WAIT_FOR_EVENT', config: { eventName: 'paid', timeout: 600 } });
    const send = await addStep(project, w.id, { type: 'SEND_EMAIL', config: { templateId } });
    const exit = await addStep(project, w.id, { type: 'EXIT', config: {} });
    const toWait = await connect(project, w.id, t.id, wait.id);
    await connect(project, w.id, wait.id, send.id, 'event');
    const timeout = await connect(project, w.id, wait.id, exit.id, 'timeout');
    expect((await as(project).patch(w.id, { enabled: true })).status).toBe(200);
    const before = (await as(project).get(w.id)).body as Journey;

    // A new step would be unreachable: refused, and not stored.
    const added = await as(project).addStep(w.id, { type: 'DELAY', config: { amount: 1, unit: 'hours' } });
    expectError(added, 422, 'VALIDATION_ERROR');
    expect(added.body.error.errors).toEqual([
      { field: expect.stringMatching(/^steps\.stp_/), message: expect.stringMatching(/^DELAY step stp_\w+ is not reachable from the trigger/), code: 'invalid_graph' },
    ]);
    expect(added.body.error.message).toMatch(/^This change would leave the enabled workflow with 1 graph problem, so it was not made: /);
    // Dropping the timeout while a "timeout" branch exists.
    const noTimeout = await as(project).patchStep(w.id, wait.id, { config: { eventName: 'paid' } });
    expect(noTimeout.body.error.errors).toEqual([
      {
        field: `transitions.${timeout.id}`,
        message: `WAIT_FOR_EVENT step ${wait.id} has no timeout, so its "timeout" branch to EXIT step ${exit.id} can never be taken; set config.timeout or remove the transition`,
        code: 'invalid_graph',
      },
    ]);
    // Cutting the trigger off.
    const cut = await as(project).disconnect(w.id, toWait.id);
    expect(cut.body.error.errors.map((e: { field: string; message: string }) => [e.field, e.message])).toEqual([
      [`steps.${t.id}`, `The trigger ${t.id} has no outgoing transition; connect it to the first step`],
      [`steps.${wait.id}`, `WAIT_FOR_EVENT step ${wait.id} is not reachable from the trigger; connect a transition to it or delete it`],
      [`steps.${send.id}`, `SEND_EMAIL step ${send.id} is not reachable from the trigger; connect a transition to it or delete it`],
      [`steps.${exit.id}`, `EXIT step ${exit.id} is not reachable from the trigger; connect a transition to it or delete it`],
    ]);
    expect(errorsOf(await as(project).removeStep(w.id, t.id))).toEqual([['params.stepId', 'trigger_step']]);
    const after = (await as(project).get(w.id)).body as Journey;
    expect(after).toEqual(before);

    // Valid edits go through: deleting the EXIT leaves the wait with its "event" branch only
    // (on timeout the execution completes), which is a valid graph.
    expect((await as(project).patchStep(w.id, wait.id, { config: { eventName: 'paid', timeout: 1200 } })).status).toBe(200);
    expect((await as(project).removeStep(w.id, exit.id)).status).toBe(200);
    const final = (await as(project).get(w.id)).body as Journey;
    expect({ enabled: final.enabled, steps: final.steps.map((s) => s.id), transitions: final.transitions.length }).toEqual({
      enabled: true,
      steps: [t.id, wait.id, send.id],
      transitions: 2,
    });
    // Disabling never needs a valid graph.
    expect((await as(project).patch(w.id, { enabled: false })).body.enabled).toBe(false);
  });
});

describe('deleting steps', () => {
  test('splice reconnects every predecessor to the single successor, keeping their ids and branches', async () => {
    const w = await createJourney(project);
    const t = trigger(w);
    const cond = await addStep(project, w.id, { type: 'CONDITION', config: { field: 'contact.email', operator: 'contains', value: '@example.org' } });
    const delay = await addStep(project, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } });
    const exit = await addStep(project, w.id, { type: 'EXIT', config: {} });
    const a = await connect(project, w.id, t.id, cond.id);
    const yes = await connect(project, w.id, cond.id, delay.id, 'yes');
    const no = await connect(project, w.id, cond.id, delay.id, 'no');
    const out = await connect(project, w.id, delay.id, exit.id);

    const res = await as(project).removeStep(w.id, delay.id, true);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: delay.id,
      deleted: true,
      reconnected: [
        { ...yes, toStepId: exit.id },
        { ...no, toStepId: exit.id },
      ],
      removedTransitionIds: [out.id],
    });
    const got = (await as(project).get(w.id)).body as Journey;
    expect(got.steps.map((s) => s.id)).toEqual([t.id, cond.id, exit.id]);
    expect(got.transitions).toEqual([a, { ...yes, toStepId: exit.id }, { ...no, toStepId: exit.id }]);

    // A step with branches has no single successor.
    const refused = await as(project).removeStep(w.id, cond.id, true);
    expectError(refused, 422, 'VALIDATION_ERROR');
    expect(refused.body.error.errors).toEqual([
      {
        field: 'query.splice',
        message: `The step has 2 outgoing branches (yes → ${exit.id}, no → ${exit.id}); there is no single successor`,
        code: 'cannot_splice',
      },
    ]);
    expect((await as(project).get(w.id)).body).toEqual(got);

    // Without splice the step goes with all its transitions.
    const plain = await as(project).removeStep(w.id, cond.id, false);
    expect(plain.body).toEqual({ id: cond.id, deleted: true, reconnected: [], removedTransitionIds: [a.id, yes.id, no.id] });
    const left = (await as(project).get(w.id)).body as Journey;
    expect({ steps: left.steps.map((s) => s.id), transitions: left.transitions }).toEqual({ steps: [t.id, exit.id], transitions: [] });

    // Splicing a step with no successor just removes it and the transitions to it.
    const send = await addStep(project, w.id, { type: 'SEND_EMAIL', config: { templateId } });
    const toSend = await connect(project, w.id, t.id, send.id);
    expect((await as(project).removeStep(w.id, send.id, true)).body).toEqual({
      id: send.id,
      deleted: true,
      reconnected: [],
      removedTransitionIds: [toSend.id],
    });

    const trig = await as(project).removeStep(w.id, t.id, true);
    expectError(trig, 422, 'VALIDATION_ERROR');
    expect(trig.body.error.errors).toEqual([{ field: 'params.stepId', message: 'The TRIGGER step cannot be deleted', code: 'trigger_step' }]);
    expect(errorsOf(await env.http().delete(`/workflows/${w.id}/steps/${exit.id}?splice=yes`).set(bearer(project.secretKey)))).toEqual([
      ['query.splice', 'invalid_value'],
    ]);
  });
});

test('delete is refused with 409 while an execution is active, allowed once it finished', async () => {
  const w = await createJourney(project);
  const contact = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'active@example.org' });
  expect(contact.status).toBe(201);
  const executionId = newId('exe');
  const em = env.orm.em.fork();
  await query(em, `insert into workflow_executions (id, project_id, workflow_id, contact_id, status) values (?, ?, ?, ?, 'WAITING')`, [
    executionId,
    project.id,
    w.id,
    contact.body.id,
  ]);
  const res = await as(project).remove(w.id);
  expectError(res, 409, 'CONFLICT');
  expect(res.body.error.message).toBe('The workflow has 1 active execution (RUNNING or WAITING) and cannot be deleted');
  expect((await as(project).get(w.id)).status).toBe(200);

  await query(em, `update workflow_executions set status = 'COMPLETED', finished_at = now() where id = ?`, [executionId]);
  const del = await as(project).remove(w.id);
  expect({ status: del.status, body: del.body }).toEqual({ status: 200, body: { id: w.id, deleted: true } });
  expectError(await as(project).get(w.id), 404, 'WORKFLOW_NOT_FOUND');
  expect(await query(em, 'select id from workflow_executions where id = ?', [executionId])).toEqual([]);
  expectError(await as(project).remove(w.id), 404, 'WORKFLOW_NOT_FOUND');
});

test('template usage lists the SEND_EMAIL steps that use the template, in this project only', async () => {
  const tpl = await as(project).createTemplate('Usage');
  const unused = await as(project).createTemplate('Unused');
  const w1 = await createJourney(project);
  const w2 = await createJourney(project);
  const s1 = await addStep(project, w1.id, { type: 'SEND_EMAIL', config: { templateId: tpl.body.id } });
  const s2 = await addStep(project, w2.id, { type: 'SEND_EMAIL', config: { templateId: tpl.body.id } });
  const s3 = await addStep(project, w2.id, { type: 'SEND_EMAIL', config: { templateId: unused.body.id } });
  const usage = await as(project).templateUsage(tpl.body.id);
  expect({ status: usage.status, body: usage.body }).toEqual({
    status: 200,
    body: { campaigns: [], workflowSteps: [{ workflowId: w1.id, stepId: s1.id }, { workflowId: w2.id, stepId: s2.id }] },
  });
  // Moved to the other template: the usage follows.
  expect((await as(project).patchStep(w2.id, s2.id, { config: { templateId: unused.body.id } })).status).toBe(200);
  expect((await as(project).templateUsage(unused.body.id)).body.workflowSteps).toEqual([
    { workflowId: w2.id, stepId: s2.id },
    { workflowId: w2.id, stepId: s3.id },
  ]);
  expect((await as(project).templateUsage(tpl.body.id)).body.workflowSteps).toEqual([{ workflowId: w1.id, stepId: s1.id }]);
  expectError(await as(other).templateUsage(tpl.body.id), 404, 'TEMPLATE_NOT_FOUND');
});

test('GET /workflows/fields: contact fields, custom fields with their type, event names', async () => {
  const p = await env.project('workflow fields');
  const auth = bearer(p.secretKey);
  expect((await as(p).fields()).body).toEqual({
    fields: [
      { field: 'contact.email', type: 'string', source: 'contact' },
      { field: 'contact.subscribed', type: 'boolean', source: 'contact' },
    ],
  });
  const c = await env.http().post('/contacts').set(auth).send({ email: 'f@example.org', data: { plan: 'pro', seats: 3, vip: true } });
  expect(c.status).toBe(201);
  for (const event of ['signup', 'paid', 'signup']) {
    expect((await env.http().post('/v1/track').set(auth).send({ email: 'f@example.org', event })).status).toBe(200);
  }
  const res = await as(p).fields();
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    fields: [
      { field: 'contact.email', type: 'string', source: 'contact' },
      { field: 'contact.subscribed', type: 'boolean', source: 'contact' },
      { field: 'data.plan', type: 'string', source: 'data' },
      { field: 'data.seats', type: 'number', source: 'data' },
      { field: 'data.vip', type: 'boolean', source: 'data' },
      { field: 'event.paid', type: 'event', source: 'event' },
      { field: 'event.signup', type: 'event', source: 'event' },
    ],
  });
});
