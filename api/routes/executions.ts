import { z } from 'zod';
import { getExecution, listExecutions } from '../../db/journeys/executions';
import { getJourney } from '../../db/journeys/journeys';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage } from '../schemas/common';
import { executionParams, executionSchema, listExecutionsQuery, startExecutionBody, journeyIdParams } from '../schemas/executions';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { cancelAllExecutions, cancelExecution, enterContact } from '../use-cases/journeys';

export function registerExecutionRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/workflows/:id/executions/cancel-all',
    tag: 'Workflow executions',
    summary: 'Cancel every running or waiting execution of the workflow',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    params: journeyIdParams,
    response: z.object({ cancelled: z.number().int() }),
    handler: ({ scope, project, params }) => cancelAllExecutions(deps, scope.em, project.id, params.id),
  });

  api.add({
    method: 'post',
    path: '/workflows/:id/executions',
    tag: 'Workflow executions',
    summary: 'Start an execution for a contact (the workflow must be enabled; the re-entry rule applies)',
    errors: {
      409: '`WORKFLOW_DISABLED`: the workflow is not enabled. `CONFLICT`: the contact already entered it (no re-entry) or has an active execution of it',
      503: TEMPORAL_UNAVAILABLE_TEXT,
    },
    auth: 'secret',
    params: journeyIdParams,
    body: startExecutionBody,
    response: executionSchema,
    status: 201,
    handler: ({ scope, project, params, body }) => enterContact(deps, scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'get',
    path: '/workflows/:id/executions',
    tag: 'Workflow executions',
    summary: 'List executions, newest first (cursor pagination; filter by `status`)',
    auth: 'secret',
    params: journeyIdParams,
    query: listExecutionsQuery,
    response: cursorPage(executionSchema),
    handler: async ({ scope, project, params, query }) => {
      await getJourney(scope.em, project.id, params.id);
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
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    params: executionParams,
    response: executionSchema,
    handler: ({ scope, project, params }) => cancelExecution(deps, scope.em, project.id, params.id, params.executionId),
  });
}
