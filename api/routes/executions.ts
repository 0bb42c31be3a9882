import { z } from 'zod';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage } from '../schemas/common';
import {
  executionParams,
  executionSchema,
  journeyIdParams,
  listExecutionsQuery,
  simulateEventBody,
  simulateEventResponse,
  startExecutionBody,
  startTestRunBody,
} from '../schemas/executions';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import {
  cancelAllExecutions,
  cancelExecution,
  enterContact,
  getExecutionView,
  listExecutionViews,
  simulateTestRunEvent,
  startTestRun,
} from '../use-cases/journeys';

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
    method: 'post',
    path: '/workflows/:id/test-runs',
    tag: 'Workflow executions',
    summary: 'Start a test run for a contact: the same execution with every delay and timeout divided by `timeScale`',
    description: `Runs the workflow's graph as it is now for the contact, whether the workflow is enabled or not (its graph must be
valid, as enabling checks it: 422 lists the problems). Every DELAY and WAIT_FOR_EVENT timeout is divided by \`timeScale\`
(default 60: a minute lasts a second). Its steps act for real: SEND_EMAIL sends the email as an execution does,
WEBHOOK calls the URL, UPDATE_CONTACT changes the contact.

A test run is not an entry: the re-entry rule neither stops it nor counts it, so the contact still enters the
workflow when its trigger is tracked, and the contact's real executions go on. It is listed with the executions
(\`test: true\`) and left out of the activity feed and its counts. Events for its WAIT_FOR_EVENT steps can be simulated
with \`POST /workflows/{id}/executions/{executionId}/events\`; the contact's tracked events reach it too.`,
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    params: journeyIdParams,
    body: startTestRunBody,
    response: executionSchema,
    status: 201,
    handler: ({ scope, project, params, body }) => startTestRun(deps, scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'get',
    path: '/workflows/:id/executions',
    tag: 'Workflow executions',
    summary: 'List executions, newest first (cursor pagination; filter by `status` and `test`)',
    auth: 'secret',
    params: journeyIdParams,
    query: listExecutionsQuery,
    response: cursorPage(executionSchema),
    handler: ({ scope, project, params, query }) => listExecutionViews(deps, scope.em, project.id, params.id, query),
  });

  api.add({
    method: 'get',
    path: '/workflows/:id/executions/:executionId',
    tag: 'Workflow executions',
    summary: 'Get one execution with its step history',
    auth: 'secret',
    params: executionParams,
    response: executionSchema,
    handler: ({ scope, project, params }) => getExecutionView(deps, scope.em, project.id, params.id, params.executionId),
  });

  api.add({
    method: 'post',
    path: '/workflows/:id/executions/:executionId/events',
    tag: 'Workflow executions',
    summary: 'Simulate an event for a test run: it reaches the run as if tracked for its contact, and is not recorded',
    description: `Delivers \`event\` to the running or waiting test run as a tracked event of its contact: a WAIT_FOR_EVENT step
waiting for that name takes it (its \`data\` is merged into the context), as it would a real one. Names the service
records itself (\`email.opened\`, \`email.clicked\`…, \`GET /events/system\`) can be simulated too; one about an email
without \`data.emailId\` is about the email the current wait waits for. A wait takes only events that arrive while it
waits, except those about its own email, which it takes whenever they came. Nothing is recorded: the event is not in
\`GET /events\`, the activity feed or analytics, and it starts no workflow.`,
    errors: {
      409: '`NOT_A_TEST_RUN`: the execution is a real one (track the event instead). `EXECUTION_ENDED`: the test run has already ended',
      503: TEMPORAL_UNAVAILABLE_TEXT,
    },
    auth: 'secret',
    params: executionParams,
    body: simulateEventBody,
    response: simulateEventResponse,
    status: 202,
    handler: ({ scope, project, params, body }) => simulateTestRunEvent(deps, scope.em, project.id, params.id, params.executionId, body),
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
