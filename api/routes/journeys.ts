import { z } from 'zod';
import { createJourney, deleteJourney, getJourney, listJourneys, updateJourney } from '../../db/journeys/journeys';
import { journeyFields } from '../../db/journeys/lookups';
import { addStep, deleteStep, getStep, triggerConfigRefused, updateStep } from '../../db/journeys/step-edits';
import { stepConfigSchemas } from '../../db/journeys/steps';
import { addTransition, deleteTransition } from '../../db/journeys/transitions';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage, idParams } from '../schemas/common';
import {
  addStepBody,
  addTransitionBody,
  createJourneyBody,
  deletedStepSchema,
  deleteStepQuery,
  journeyDetailSchema,
  journeyFieldsSchema,
  journeyListQuery,
  journeySchema,
  stepParams,
  stepSchema,
  transitionParams,
  transitionSchema,
  updateJourneyBody,
  updateStepBody,
} from '../schemas/journeys';
import { parseOrThrow } from '../validation';

/**
 * Journey definitions (called workflows in the API, under `/workflows`; docs/journeys.md). Executions (`/workflows/:id/executions…`)
 * are registered by api/routes/executions.ts. `/workflows/fields` comes before `/workflows/:id`.
 */
export function registerJourneyRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/workflows',
    tag: 'Workflows',
    summary: 'List workflows, newest first (cursor pagination)',
    auth: 'secret',
    query: journeyListQuery,
    response: cursorPage(journeySchema),
    handler: ({ scope, project, query }) => listJourneys(scope.em, project.id, query),
  });

  api.add({
    method: 'get',
    path: '/workflows/fields',
    tag: 'Workflows',
    summary: 'Fields a CONDITION step can test: contact.email, contact.subscribed, data.<key> (with type) and event.<name>',
    auth: 'secret',
    response: journeyFieldsSchema,
    handler: async ({ scope, project }) => ({ fields: await journeyFields(scope.em, project.id) }),
  });

  api.add({
    method: 'post',
    path: '/workflows',
    tag: 'Workflows',
    summary: 'Create a workflow (triggerType EVENT, disabled), with its TRIGGER entry step',
    description: `A workflow starts one execution per contact each time its \`eventName\` is tracked for that contact
(\`POST /v1/track\`, or an event the service emits such as \`segment.<slug>.entry\`). It is created
disabled, with its TRIGGER step; build the graph, then enable it:

1. \`POST /workflows/{id}/steps\` for each step: SEND_EMAIL \`{templateId}\`, DELAY \`{amount, unit}\`,
   WAIT_FOR_EVENT \`{eventName, timeout?}\`, CONDITION \`{field, operator, value?}\`, WEBHOOK \`{url, …}\`,
   UPDATE_CONTACT \`{updates?, subscribed?}\`, EXIT.
2. \`POST /workflows/{id}/transitions\` to connect them, starting from the TRIGGER step; CONDITION
   steps need a \`yes\` and a \`no\` branch.
3. \`PATCH /workflows/{id}\` with \`{"enabled": true}\`: the graph is validated then (422 listing every problem).

Without \`allowReentry\` a contact enters at most once, ever. Executions run durably (delays of days
survive restarts); each keeps the graph it started with, so edits never disturb runs in flight.`,
    examples: {
      request: {
        welcome: {
          summary: 'A welcome journey started by the signed-up event',
          value: { name: 'Welcome', description: 'Greets new users, then nudges them after 3 days', eventName: 'signed-up' },
        },
      },
    },
    auth: 'secret',
    body: createJourneyBody,
    response: journeyDetailSchema,
    status: 201,
    handler: ({ scope, project, body }) => createJourney(scope.em, project.id, body),
  });

  api.add({
    method: 'get',
    path: '/workflows/:id',
    tag: 'Workflows',
    summary: 'Get a workflow with its steps and transitions',
    auth: 'secret',
    params: idParams,
    response: journeyDetailSchema,
    handler: ({ scope, project, params }) => getJourney(scope.em, project.id, params.id),
  });

  api.add({
    method: 'patch',
    path: '/workflows/:id',
    tag: 'Workflows',
    summary: 'Update name, description, trigger event, enabled, allowReentry (enabling validates the graph: 422 with every problem)',
    description: 'Disabling stops new executions; those running carry on (cancel them with `POST /workflows/{id}/executions/cancel-all`).',
    auth: 'secret',
    params: idParams,
    body: updateJourneyBody,
    response: journeyDetailSchema,
    handler: ({ scope, project, params, body }) => updateJourney(scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'delete',
    path: '/workflows/:id',
    tag: 'Workflows',
    summary: 'Delete a workflow; 409 while it has RUNNING or WAITING executions',
    errors: { 409: '`CONFLICT`: the workflow has RUNNING or WAITING executions; cancel them first' },
    auth: 'secret',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteJourney(scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });

  api.add({
    method: 'post',
    path: '/workflows/:id/steps',
    tag: 'Workflows',
    summary: 'Add a step (config validated for its type; a SEND_EMAIL template must be one of the project)',
    auth: 'secret',
    params: idParams,
    body: addStepBody,
    response: stepSchema,
    status: 201,
    handler: ({ scope, project, params, body }) => addStep(scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'patch',
    path: '/workflows/:id/steps/:stepId',
    tag: 'Workflows',
    summary: "Rename a step and/or replace its config (validated for the step's type)",
    auth: 'secret',
    params: stepParams,
    body: updateStepBody,
    response: stepSchema,
    handler: async ({ scope, project, params, body }) => {
      let config: Record<string, unknown> | undefined;
      if (body.config !== undefined) {
        // A step's type never changes, so it can be read before the transaction that writes.
        const step = await getStep(scope.em, project.id, params.id, params.stepId);
        if (step.type === 'TRIGGER') throw triggerConfigRefused(params.id);
        config = parseOrThrow(stepConfigSchemas[step.type], body.config, 'config') as Record<string, unknown>;
      }
      return updateStep(scope.em, project.id, params.id, params.stepId, { name: body.name, config });
    },
  });

  api.add({
    method: 'delete',
    path: '/workflows/:id/steps/:stepId',
    tag: 'Workflows',
    summary: 'Delete a step and its transitions; `splice=true` first reconnects its predecessors to its single successor',
    auth: 'secret',
    params: stepParams,
    query: deleteStepQuery,
    response: deletedStepSchema,
    handler: ({ scope, project, params, query }) => deleteStep(scope.em, project.id, params.id, params.stepId, query),
  });

  api.add({
    method: 'post',
    path: '/workflows/:id/transitions',
    tag: 'Workflows',
    summary: 'Connect two steps of the workflow; a CONDITION source needs branch yes|no; one transition per branch (409)',
    errors: { 409: '`CONFLICT`: the source step already has a transition on this branch' },
    auth: 'secret',
    params: idParams,
    body: addTransitionBody,
    response: transitionSchema,
    status: 201,
    handler: ({ scope, project, params, body }) => addTransition(scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'delete',
    path: '/workflows/:id/transitions/:transitionId',
    tag: 'Workflows',
    summary: 'Delete a transition',
    auth: 'secret',
    params: transitionParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteTransition(scope.em, project.id, params.id, params.transitionId);
      return { id: params.transitionId, deleted: true as const };
    },
  });
}
