import type { EntityManager } from '@mikro-orm/postgresql';
import { getContact } from '../../db/contacts/contacts';
import type { JsonValue } from '../../db/entities/contact';
import { activeExecutionIdsOfJourney, type ExecutionDto, finishExecution, getExecution } from '../../db/journeys/executions';
import { getJourney } from '../../db/journeys/journeys';
import { AppError, conflict } from '../../errors';
import { cancelJourney } from '../../temporal/journeys/lifecycle';
import { startExecution } from '../../temporal/triggers/dispatch';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

type Deps = Pick<AppDeps, 'temporal' | 'config'>;

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
): Promise<ExecutionDto> {
  const journey = await getJourney(em, projectId, journeyId);
  if (!journey.enabled) {
    throw new AppError(409, 'WORKFLOW_DISABLED', 'The workflow is not enabled', {
      suggestion: 'Enable it with PATCH /workflows/:id {"enabled": true} first.',
    });
  }
  const contact = await getContact(em, projectId, input.contactId);
  const executionId = await callTemporal(() =>
    startExecution(
      { em, temporal: deps.temporal, config: deps.config },
      {
        projectId,
        journeyId: journey.id,
        contactId: contact.id,
        allowReentry: journey.allowReentry,
        context: (input.context ?? {}) as Record<string, JsonValue>,
      },
    ),
  );
  if (!executionId) {
    throw conflict(
      journey.allowReentry
        ? 'The contact already has an active execution of this workflow'
        : 'The contact has already entered this workflow, which does not allow re-entry',
      'Wait for the active execution to end, or enable allowReentry on the workflow.',
    );
  }
  return getExecution(em, projectId, journey.id, executionId);
}

/** DELETE /workflows/:id/executions/:executionId: a running or waiting execution only. */
export async function cancelExecution(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  journeyId: string,
  executionId: string,
): Promise<ExecutionDto> {
  const execution = await getExecution(em, projectId, journeyId, executionId);
  if (execution.status !== 'RUNNING' && execution.status !== 'WAITING') {
    throw conflict(`The execution has already ended (${execution.status})`, 'Only running or waiting executions can be cancelled.');
  }
  await cancel(deps, em, execution.id);
  return getExecution(em, projectId, journeyId, executionId);
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
