import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { bearer, type TestEnv } from './env';
import { waitUntil } from './sending';

export interface StepSpec {
  key: string;
  type: string;
  config: Record<string, unknown>;
}

/** [from step key or 'trigger', to step key, branch?] */
export type TransitionSpec = [string, string, string?];

export interface BuiltJourney {
  id: string;
  stepIds: Record<string, string>;
}

/** Creates a workflow through the API, adds its steps and transitions, and enables it. */
export async function buildJourney(
  env: TestEnv,
  project: ProjectWithKeys,
  spec: { eventName: string; allowReentry?: boolean; steps: StepSpec[]; transitions: TransitionSpec[]; enable?: boolean },
): Promise<BuiltJourney> {
  const auth = bearer(project.secretKey);
  const created = await env
    .http()
    .post('/workflows')
    .set(auth)
    .send({ name: `wf ${spec.eventName}`, eventName: spec.eventName, allowReentry: spec.allowReentry ?? false });
  if (created.status !== 201) throw new Error(`create workflow: ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.id as string;
  const stepIds: Record<string, string> = {
    trigger: (created.body.steps as { id: string; type: string }[]).find((s) => s.type === 'TRIGGER')!.id,
  };
  for (const step of spec.steps) {
    const res = await env.http().post(`/workflows/${id}/steps`).set(auth).send({ type: step.type, config: step.config });
    if (res.status !== 201) throw new Error(`add step ${step.key}: ${res.status} ${JSON.stringify(res.body)}`);
    stepIds[step.key] = res.body.id;
  }
  for (const [from, to, branch] of spec.transitions) {
    const res = await env
      .http()
      .post(`/workflows/${id}/transitions`)
      .set(auth)
      .send({ fromStepId: stepIds[from], toStepId: stepIds[to], ...(branch ? { branch } : {}) });
    if (res.status !== 201) throw new Error(`add transition ${from}→${to}: ${res.status} ${JSON.stringify(res.body)}`);
  }
  if (spec.enable !== false) {
    const res = await env.http().patch(`/workflows/${id}`).set(auth).send({ enabled: true });
    if (res.status !== 200) throw new Error(`enable: ${res.status} ${JSON.stringify(res.body)}`);
  }
  return { id, stepIds };
}

export interface ExecutionView {
  id: string;
  status: string;
  contactId: string;
  currentStepId: string | null;
  waitingForEvent: string | null;
  context: Record<string, unknown>;
  exitReason: string | null;
  error: string | null;
  steps?: { seq: number; stepId: string; stepType: string; status: string; branch: string | null; output: unknown }[];
}

export async function listExecutions(env: TestEnv, project: ProjectWithKeys, workflowId: string, status?: string) {
  const res = await env
    .http()
    .get(`/workflows/${workflowId}/executions${status ? `?status=${status}` : ''}`)
    .set(bearer(project.secretKey));
  if (res.status !== 200) throw new Error(`list executions: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as ExecutionView[];
}

export async function getExecution(env: TestEnv, project: ProjectWithKeys, workflowId: string, executionId: string) {
  const res = await env.http().get(`/workflows/${workflowId}/executions/${executionId}`).set(bearer(project.secretKey));
  if (res.status !== 200) throw new Error(`get execution: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as ExecutionView;
}

/** Waits until the workflow has an execution for the contact in one of `statuses`, and returns it with its steps. */
export async function waitForExecution(
  env: TestEnv,
  project: ProjectWithKeys,
  workflowId: string,
  contactId: string,
  statuses: string[],
  timeoutMs = 20_000,
): Promise<ExecutionView> {
  const found = await waitUntil(async () => {
    const list = await listExecutions(env, project, workflowId);
    return list.find((e) => e.contactId === contactId && statuses.includes(e.status));
  }, timeoutMs);
  return getExecution(env, project, workflowId, found.id);
}

export async function track(env: TestEnv, project: ProjectWithKeys, email: string, event: string, data?: Record<string, unknown>) {
  const res = await env.http().post('/v1/track').set(bearer(project.secretKey)).send({ email, event, ...(data ? { data } : {}) });
  if (res.status !== 200) throw new Error(`track: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { contact: string; event: string; timestamp: string };
}

/**
 * Resolves once the trigger dispatcher is done with the event (an id from track()): its
 * trigger_outbox row, written with the event when a journey listened, is deleted only after every
 * start and signal it asked for succeeded. From then on what the event did to journeys is
 * decided, so an execution it did not start will not appear later.
 */
export async function eventDispatched(env: TestEnv, eventId: string, timeoutMs = 20_000): Promise<void> {
  await waitUntil(
    async () => !(await queryOne(env.orm.em.fork(), 'select 1 as queued from trigger_outbox where event_id = ?', [eventId])),
    { timeoutMs, what: `the dispatch of event ${eventId}` },
  );
}
