import type { EntityManager } from '@mikro-orm/postgresql';
import { getContact } from '../../db/contacts/contacts';
import type { JsonValue } from '../../db/entities/contact';
import { newId } from '../../db/ids';
import {
  ACTIVE_STATUSES,
  activeExecutionIdsOfJourney,
  emailOfCurrentWait,
  type ExecutionDto,
  type ExecutionStatus,
  finishExecution,
  getExecution,
  listExecutions,
} from '../../db/journeys/executions';
import { getJourney } from '../../db/journeys/journeys';
import { assertValidGraph } from '../../db/journeys/stored-graph';
import type { CursorPage } from '../../db/paging';
import { isEmailOutcome } from '../../db/record-events';
import { AppError, conflict } from '../../errors';
import { cancelJourney, journeyTemporalLink, signalTrackedEvent } from '../../temporal/journeys/lifecycle';
import { startExecution } from '../../temporal/triggers/dispatch';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

type Deps = Pick<AppDeps, 'temporal' | 'config'>;

/** An execution as the API shows it: the row, with where it runs in Temporal (and the Web UI) instead of the bare run id. */
export type ExecutionView = Omit<ExecutionDto, 'temporalRunId'> & { temporal: ReturnType<typeof journeyTemporalLink> };

function view(deps: Deps, execution: ExecutionDto): ExecutionView {
  const { temporalRunId, ...rest } = execution;
  return { ...rest, temporal: journeyTemporalLink(deps.config.temporal, execution.id, temporalRunId) };
}

/** GET /workflows/:id/executions/:executionId, and what the other execution routes answer. */
export async function getExecutionView(deps: Deps, em: EntityManager, projectId: string, journeyId: string, executionId: string): Promise<ExecutionView> {
  return view(deps, await getExecution(em, projectId, journeyId, executionId));
}

/** GET /workflows/:id/executions: a journey of the project, then a page of its executions. */
export async function listExecutionViews(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journeyId: string,
  opts: { limit: number; cursor?: string; status?: ExecutionStatus; test?: boolean },
): Promise<CursorPage<ExecutionView>> {
  await getJourney(em, projectId, journeyId);
  const page = await listExecutions(em, projectId, journeyId, opts);
  return { ...page, data: page.data.map((e) => view(deps, e)) };
}

/**
 * POST /workflows/:id/executions: an enabled workflow, a contact of the project, the re-entry rule
 * (the claim), then the execution's start; a start that fails releases the claim (startExecution).
 */
export async function enterContact(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journeyId: string,
  input: { contactId: string; context?: Record<string, unknown> },
): Promise<ExecutionView> {
  const journey = await getJourney(em, projectId, journeyId);
  if (!journey.enabled) {
    throw new AppError(409, 'WORKFLOW_DISABLED', 'The workflow is not enabled', {
      suggestion: 'Enable it with PATCH /workflows/:id {"enabled": true} first.',
    });
  }
  const contact = await getContact(em, projectId, input.contactId);
  const executionId = await startFor(deps, em, projectId, journey, contact.id, input.context);
  if (!executionId) {
    throw conflict(
      journey.allowReentry
        ? 'The contact already has an active execution of this workflow'
        : 'The contact has already entered this workflow, which does not allow re-entry',
      'Wait for the active execution to end, or enable allowReentry on the workflow.',
    );
  }
  return getExecutionView(deps, em, projectId, journey.id, executionId);
}

/**
 * POST /workflows/:id/test-runs: the journey's graph as it is now, enabled or not (checked as
 * enabling would check it), run for the contact with every timer divided by `timeScale`. It is
 * not an entry (the re-entry rule neither stops it nor counts it) and leaves the contact's real
 * executions alone; a start that fails removes it (startExecution).
 */
export async function startTestRun(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journeyId: string,
  input: { contactId: string; timeScale: number; context?: Record<string, unknown> },
): Promise<ExecutionView> {
  const journey = await getJourney(em, projectId, journeyId);
  await assertValidGraph(
    em,
    journey.id,
    (n) => `The workflow cannot be test-run: its graph has ${n} problem${n === 1 ? '' : 's'}`,
    'Fix the steps and transitions listed in error.errors, then start the test run again.',
  );
  const contact = await getContact(em, projectId, input.contactId);
  const executionId = await startFor(deps, em, projectId, journey, contact.id, input.context, { timeScale: input.timeScale });
  // A test run claims no entry, so its claim is never refused.
  return getExecutionView(deps, em, projectId, journey.id, executionId!);
}

/** The journey's workflow for the contact: an entry, or with `test` a test run. Null when the entry rule refuses it. */
function startFor(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journey: { id: string; allowReentry: boolean },
  contactId: string,
  context: Record<string, unknown> | undefined,
  test?: { timeScale: number },
): Promise<string | null> {
  return callTemporal(async () => {
    const started = await startExecution(
      { em, temporal: deps.temporal, config: deps.config },
      {
        projectId,
        journeyId: journey.id,
        contactId,
        allowReentry: journey.allowReentry,
        context: (context ?? {}) as Record<string, JsonValue>,
        ...(test ? { test } : {}),
      },
    );
    return started?.id ?? null;
  });
}

/**
 * POST /workflows/:id/executions/:executionId/events: a running or waiting test run receives the
 * event as its contact's tracked events arrive (the trackedEvent signal), without it being recorded:
 * no row in events, no activity, no journey started. An event about an email without `emailId`
 * is about the email the run's current wait waits for, as the real one would be.
 */
export async function simulateTestRunEvent(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journeyId: string,
  executionId: string,
  input: { event: string; data?: Record<string, unknown> },
): Promise<{ delivered: boolean }> {
  const execution = await getExecution(em, projectId, journeyId, executionId);
  if (!execution.test) {
    throw new AppError(409, 'NOT_A_TEST_RUN', 'Events can be simulated for test runs only, and this is a real execution', {
      suggestion: 'Track the event for the contact (POST /v1/track), or start a test run with POST /workflows/:id/test-runs.',
    });
  }
  if (!ACTIVE_STATUSES.includes(execution.status)) {
    throw new AppError(409, 'EXECUTION_ENDED', `The test run has already ended (${execution.status})`, {
      suggestion: 'Start another test run with POST /workflows/:id/test-runs.',
    });
  }
  const data = { ...input.data } as Record<string, unknown>;
  if (isEmailOutcome(input.event) && data.emailId === undefined) {
    const emailId = await emailOfCurrentWait(em, execution.id, input.event);
    if (emailId !== undefined) data.emailId = emailId;
  }
  const delivered = await callTemporal(() =>
    signalTrackedEvent(deps.temporal, execution.id, { eventId: newId('evt'), name: input.event, data, trackedAt: new Date().toISOString() }),
  );
  return { delivered };
}

/** DELETE /workflows/:id/executions/:executionId: a running or waiting execution only. */
export async function cancelExecution(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journeyId: string,
  executionId: string,
): Promise<ExecutionView> {
  const execution = await getExecution(em, projectId, journeyId, executionId);
  if (execution.status !== 'RUNNING' && execution.status !== 'WAITING') {
    throw conflict(`The execution has already ended (${execution.status})`, 'Only running or waiting executions can be cancelled.');
  }
  await cancel(deps, em, execution.id);
  return getExecutionView(deps, em, projectId, journeyId, executionId);
}

/** POST /workflows/:id/executions/cancel-all: every running or waiting execution, one after the other. */
export async function cancelAllExecutions(deps: Deps, em: EntityManager, projectId: string, journeyId: string): Promise<{ cancelled: number }> {
  await getJourney(em, projectId, journeyId);
  const ids = await activeExecutionIdsOfJourney(em, projectId, journeyId);
  for (const id of ids) await cancel(deps, em, id);
  return { cancelled: ids.length };
}

/**
 * Cancelling is clean: the status is CANCELLED at once, and Temporal stops the execution before
 * that commits (the execution's own CANCELLED record waits on the row, then finds it written).
 */
const cancel = (deps: Deps, em: EntityManager, executionId: string) =>
  em.transactional(async (tx) => {
    await finishExecution(tx, { executionId, status: 'CANCELLED' });
    await callTemporal(() => cancelJourney(deps.temporal, executionId));
  });
