import { z } from 'zod';
import { BRANCHES, STEP_TYPES, stepConfigSchemas, type UserStepType } from '../../db/journeys/steps';
import { cursorQuery } from './common';
import { listenableEventName } from '../../db/events/catalogue';

const name = z.string().trim().min(1).max(255);
const description = z.string().max(2000).nullable().optional();
const eventName = listenableEventName.describe(
  'Name of the event that starts an execution for the contact it was recorded for: a name you track, or one the service records (GET /events/system)',
);
const stepName = z.string().trim().min(1).max(255).nullable().optional().describe('Label shown in editors');

export const createJourneyBody = z.object({
  name,
  description,
  eventName,
  allowReentry: z
    .boolean()
    .optional()
    .describe('false (default): a contact enters at most once, ever; true: again once none of its executions is active'),
});

export const updateJourneyBody = z
  .object({
    name: name.optional(),
    description,
    eventName: eventName.optional(),
    triggerType: z.literal('EVENT').optional().describe('The only trigger type; accepted for symmetry with the response'),
    triggerConfig: z.object({ eventName }).optional().describe('Same as `eventName`'),
    enabled: z
      .boolean()
      .optional()
      .describe('true validates the graph first: 422 with one error per problem (field steps.<id>, transitions.<id> or graph)'),
    allowReentry: z.boolean().optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'Send at least one field to change' })
  .refine((b) => b.eventName === undefined || b.triggerConfig === undefined || b.eventName === b.triggerConfig.eventName, {
    message: 'eventName and triggerConfig.eventName disagree; send one of them',
    path: ['triggerConfig', 'eventName'],
  })
  .transform(({ triggerConfig, triggerType: _t, ...rest }) => ({ ...rest, eventName: rest.eventName ?? triggerConfig?.eventName }));

export const journeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    triggerType: z.literal('EVENT'),
    triggerConfig: z.object({ eventName: z.string() }),
    enabled: z.boolean(),
    allowReentry: z.boolean(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Workflow' });

export const stepSchema = z
  .object({
    id: z.string(),
    type: z.enum(['TRIGGER', ...STEP_TYPES]),
    name: z.string().nullable(),
    config: z.record(z.string(), z.unknown()).describe('As validated for the type, defaults filled in; TRIGGER: {eventName}'),
  })
  .meta({ id: 'WorkflowStep' });

export const transitionSchema = z
  .object({
    id: z.string(),
    fromStepId: z.string(),
    toStepId: z.string(),
    branch: z.enum(BRANCHES).nullable().describe('CONDITION: yes|no; WAIT_FOR_EVENT: event|timeout or null (both); otherwise null'),
  })
  .meta({ id: 'WorkflowTransition' });

export const journeyDetailSchema = journeySchema
  .extend({ steps: z.array(stepSchema), transitions: z.array(transitionSchema) })
  .meta({ id: 'WorkflowDetail' });

export const journeyListQuery = cursorQuery;

const stepBody = <T extends UserStepType>(type: T) => z.object({ type: z.literal(type), name: stepName, config: stepConfigSchemas[type] });

/** One body shape per step type, so the document shows every config and errors name `config.<key>`. */
export const addStepBody = z.discriminatedUnion(
  'type',
  [
    stepBody('SEND_EMAIL'),
    stepBody('DELAY'),
    stepBody('WAIT_FOR_EVENT'),
    stepBody('CONDITION'),
    stepBody('WEBHOOK'),
    stepBody('UPDATE_CONTACT'),
    stepBody('EXIT'),
  ],
  {
  error: (issue) =>
    issue.code === 'invalid_union'
      ? (issue.input as { type?: unknown } | undefined)?.type === 'TRIGGER'
        ? 'The TRIGGER step is created with the workflow; add one of ' + STEP_TYPES.join(', ')
        : `type must be one of ${STEP_TYPES.join(', ')}`
      : undefined,
  },
);

export const updateStepBody = z
  .object({
    name: stepName,
    config: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("Replaces the config; validated for the step's type (see POST /workflows/{id}/steps). Not for the TRIGGER step"),
  })
  .refine((b) => b.name !== undefined || b.config !== undefined, { message: 'Send name and/or config' });

export const stepParams = z.object({ id: z.string().min(1), stepId: z.string().min(1) });

export const deleteStepQuery = z.object({
  splice: z
    .enum(['true', 'false'])
    .default('false')
    .describe('true: transitions that led to the step are redirected to its single successor before it is deleted')
    .transform((v) => v === 'true'),
});

export const deletedStepSchema = z.object({
  id: z.string(),
  deleted: z.literal(true),
  reconnected: z.array(transitionSchema).describe('Transitions that led to the step and now lead to its successor (splice)'),
  removedTransitionIds: z.array(z.string()).describe('Transitions deleted with the step'),
});

export const addTransitionBody = z.object({
  fromStepId: z.string().min(1),
  toStepId: z.string().min(1),
  branch: z
    .enum(BRANCHES)
    .nullable()
    .optional()
    .describe('Required from a CONDITION step (yes|no); from WAIT_FOR_EVENT: event, timeout, or none for both; otherwise none'),
});

export const transitionParams = z.object({ id: z.string().min(1), transitionId: z.string().min(1) });

export const journeyFieldsSchema = z.object({
  fields: z.array(
    z.object({
      field: z.string().describe('contact.email, contact.subscribed, data.<key> or event.<name>'),
      type: z.enum(['string', 'number', 'boolean', 'date', 'event']).describe('event: use with triggered, notTriggered, triggeredWithin, triggeredOlderThan'),
      source: z.enum(['contact', 'data', 'event']),
    }),
  ),
});
