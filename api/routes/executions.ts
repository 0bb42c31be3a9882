import { z } from 'zod';
import { getContact } from '../../db/contacts/contacts';
import type { JsonValue } from '../../db/entities/contact';
import { activeExecutionIdsOfWorkflow, finishExecution, getExecution, listExecutions } from '../../db/journeys/executions';
import { getWorkflow } from '../../db/journeys/journeys';
import { AppError, conflict } from '../../errors';
import { startExecution } from '../../temporal/triggers/dispatch';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage } from '../schemas/common';
import { executionParams, executionSchema, listExecutionsQuery, startExecutionBody, workflowIdParams } from '../schemas/executions';
import type { EntityManager } from '@mikro-orm/postgresql';

export function registerExecutionRoutes(api: RouteRegistry, deps: AppDeps): void {
  /** Cancelling is clean: Temporal stops the execution and its status is CANCELLED at once. */
  const cancel = async (em: EntityManager, executionId: string) => {
    await deps.temporal.cancelJourney(executionId);
    await finishExecution(em, { executionId, status: 'CANCELLED' });
  };

  api.add({
    method: 'post',
    path: '/workflows/:id/executions/cancel-all',
    tag: 'Workflow executions',
    summary: 'Cancel every running or waiting execution of the workflow',
    auth: 'secret',
    params: workflowIdParams,
    response: z.object({ cancelled: z.number().int() }),
    handler: async ({ scope, project, params }) => {
      await getWorkflow(scope.em, project.id, params.id);
      const ids = await activeExecutionIdsOfWorkflow(scope.em, project.id, params.id);
      for (const id of ids) await cancel(scope.em, id);
      return { cancelled: ids.length };
    },
  });

  api.add({
    method: 'post',
    path: '/workflows/:id/executions',
    tag: 'Workflow executions',
    summary: 'Start an execution for a contact (the workflow must be enabled; the re-entry rule applies)',
    errors: {
      409: '`WORKFLOW_DISABLED`: the workflow is not enabled. `CONFLICT`: the contact already entered it (no re-entry) or has an active execution of it',
    },
    auth: 'secret',
    params: workflowIdParams,
    body: startExecutionBody,
    response: executionSchema,
    status: 201,
    handler: async ({ scope, project, params, body }) => {
      const workflow = await getWorkflow(scope.em, project.id, params.id);
      if (!workflow.enabled) {
        throw new AppError(409, 'WORKFLOW_DISABLED', 'The workflow is not enabled', {
          suggestion: 'Enable it with PATCH /workflows/:id {"enabled": true} first.',
        });
      }
      const contact = await getContact(scope.em, project.id, body.contactId);
      const executionId = await startExecution(
        { em: scope.em, temporal: deps.temporal, config: deps.config },
        {
          projectId: project.id,
          workflowId: workflow.id,
          contactId: contact.id,
          allowReentry: workflow.allowReentry,
          context: (body.context ?? {}) as Record<string, JsonValue>,
        },
      );
      if (!executionId) {
        throw conflict(
          workflow.allowReentry
            ? 'The contact already has an active execution of this workflow'
            : 'The contact has already entered this workflow, which does not allow re-entry',
          'Wait for the active execution to end, or enable allowReentry on the workflow.',
        );
      }
      return getExecution(scope.em, project.id, workflow.id, executionId);
    },
  });

  api.add({
    method: 'get',
    path: '/workflows/:id/executions',
    tag: 'Workflow executions',
    summary: 'List executions, newest first (cursor pagination; filter by `status`)',
    auth: 'secret',
    params: workflowIdParams,
    query: listExecutionsQuery,
    response: cursorPage(executionSchema),
    handler: async ({ scope, project, params, query }) => {
      await getWorkflow(scope.em, project.id, params.id);
      return listExecutions(scope.em, project.id, params.id, query);
    },
  });

  api.add({
    method: 'get',
    path: '/workflows/:id/executions/:executionId',
    tag: 'Workflow executions',
    summary: 'Get one execution with its step history',
    auth: 'secret',
    params: executionParams,
    response: executionSchema,
    handler: ({ scope, project, params }) => getExecution(scope.em, project.id, params.id, params.executionId),
  });

  api.add({
    method: 'delete',
    path: '/workflows/:id/executions/:executionId',
    tag: 'Workflow executions',
    summary: 'Cancel a running or waiting execution',
    auth: 'secret',
    params: executionParams,
    response: executionSchema,
    handler: async ({ scope, project, params }) => {
      const execution = await getExecution(scope.em, project.id, params.id, params.executionId);
      if (execution.status !== 'RUNNING' && execution.status !== 'WAITING') {
        throw conflict(`The execution has already ended (${execution.status})`, 'Only running or waiting executions can be cancelled.');
      }
      await cancel(scope.em, execution.id);
      return getExecution(scope.em, project.id, params.id, params.executionId);
    },
  });
}
