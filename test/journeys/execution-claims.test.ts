import { claimExecution } from '../../db/journeys/executions';
import { query } from '../../db/sql';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';

/**
 * The claim an execution starts with (db/journeys/executions.ts claimExecution), one statement:
 * the re-entry rule, the execution row at its first step with that step's start, a claim found
 * again under the same id (a dispatcher repeating a start that a crash cut off), and the names
 * the Temporal UI shows. No worker: nothing here starts a workflow.
 */

let env: TestEnv;
let project: ProjectWithKeys;

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('claims');
}, 60_000);

afterAll(() => env?.close());

async function contact(email: string): Promise<string> {
  const res = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email });
  expect([200, 201]).toContain(res.status);
  return res.body.id as string;
}

const waitStep = (eventName: string) => ({ key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName } });
const firstWait = (stepId: string, eventName: string) => ({ seq: 1, stepId, stepType: 'WAIT_FOR_EVENT', waiting: true, waitingForEvent: eventName });

async function rowOf(id: string) {
  const em = env.orm.em.fork();
  const [execution] = await query<{ status: string; current_step_id: string | null; waiting_for_event: string | null; context: unknown }>(
    em,
    'select status, current_step_id, waiting_for_event, context from workflow_executions where id = ?',
    [id],
  );
  const steps = await query<{ seq: number; step_id: string; step_type: string; status: string }>(
    em,
    'select seq, step_id, step_type, status from execution_steps where execution_id = ? order by seq',
    [id],
  );
  return { execution, steps };
}

test('a first claim writes the execution at its first step; the same id claimed again finds it; the names come with it', async () => {
  const wf = await buildJourney(env, project, { eventName: 'claim-a', steps: [waitStep('paid')], transitions: [['trigger', 'wait']] });
  const contactId = await contact('claim-a@example.org');
  const input = { projectId: project.id, journeyId: wf.id, contactId, allowReentry: false, context: { plan: 'pro' }, executionId: 'exe_claimtest0000000000a' };

  const first = await claimExecution(env.orm.em.fork(), input, firstWait(wf.stepIds.wait!, 'paid'));
  expect(first).toEqual({ id: input.executionId, firstStepRecorded: true, names: { workflow: 'wf claim-a', contact: 'claim-a@example.org' } });
  const { execution, steps } = await rowOf(input.executionId);
  expect(execution).toEqual({ status: 'WAITING', current_step_id: wf.stepIds.wait, waiting_for_event: 'paid', context: { plan: 'pro' } });
  expect(steps).toEqual([{ seq: 1, step_id: wf.stepIds.wait, step_type: 'WAIT_FOR_EVENT', status: 'RUNNING' }]);

  // A dispatcher repeating this start (after a crash) gets the same execution, nothing written twice.
  const again = await claimExecution(env.orm.em.fork(), input, firstWait(wf.stepIds.wait!, 'paid'));
  expect(again).toEqual(first);
  expect((await rowOf(input.executionId)).steps).toHaveLength(1);

  // Without re-entry, another event for the same contact enters nothing, even after this one ends.
  await query(env.orm.em.fork(), `update workflow_executions set status = 'COMPLETED' where id = ?`, [input.executionId]);
  expect(await claimExecution(env.orm.em.fork(), { ...input, executionId: 'exe_claimtest0000000000b' }, firstWait(wf.stepIds.wait!, 'paid'))).toBeNull();
  expect((await rowOf('exe_claimtest0000000000b')).execution).toBeUndefined();
});

test('with re-entry: again once the active execution has ended, never two at once; a claim without a first step', async () => {
  const wf = await buildJourney(env, project, { eventName: 'claim-b', allowReentry: true, steps: [waitStep('paid')], transitions: [['trigger', 'wait']] });
  const contactId = await contact('claim-b@example.org');
  const base = { projectId: project.id, journeyId: wf.id, contactId, allowReentry: true, context: {} };

  const one = await claimExecution(env.orm.em.fork(), { ...base, executionId: 'exe_claimtest0000000000c' }, firstWait(wf.stepIds.wait!, 'paid'));
  expect(one?.id).toBe('exe_claimtest0000000000c');
  expect(await claimExecution(env.orm.em.fork(), { ...base, executionId: 'exe_claimtest0000000000d' }, firstWait(wf.stepIds.wait!, 'paid'))).toBeNull();

  await query(env.orm.em.fork(), `update workflow_executions set status = 'COMPLETED' where id = ?`, [one!.id]);
  // No executionId (a start from the dashboard): a new id; no first step: RUNNING, no step recorded.
  const two = await claimExecution(env.orm.em.fork(), base);
  expect(two).toMatchObject({ firstStepRecorded: false, names: { workflow: 'wf claim-b', contact: 'claim-b@example.org' } });
  expect(two!.id).toMatch(/^exe_/);
  expect(await rowOf(two!.id)).toEqual({ execution: { status: 'RUNNING', current_step_id: null, waiting_for_event: null, context: {} }, steps: [] });
});
