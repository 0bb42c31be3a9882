import { z } from 'zod';
import { listenableEventName } from '../events/catalogue';
import { CONDITION_OPERATORS, DURATION_UNITS, TIMED_OPERATORS, VALUELESS_OPERATORS } from '../conditions/grammar';

/**
 * Step types and their configs (in the OpenAPI description of the `/workflows` step routes). The
 * API validates configs with these schemas; the `journey` Temporal workflow receives them, already valid, inside its graph snapshot.
 */
export const STEP_TYPES = ['SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type UserStepType = (typeof STEP_TYPES)[number];
/** TRIGGER is the entry step created with every journey; it cannot be added or removed. */
export type StepType = UserStepType | 'TRIGGER';

const durationUnit = z.enum(DURATION_UNITS);
const MAX_DELAY_MINUTES = 365 * 24 * 60;
const UNIT_MINUTES = { minutes: 1, hours: 60, days: 24 * 60 } as const;

export const stepConfigSchemas = {
  SEND_EMAIL: z.object({
    templateId: z.string().min(1),
    recipient: z
      .discriminatedUnion('type', [
        z.object({ type: z.literal('CONTACT') }),
        z.object({ type: z.literal('CUSTOM'), customEmail: z.email() }),
      ])
      .default({ type: 'CONTACT' }),
  }),
  DELAY: z
    .object({ amount: z.number().int().positive(), unit: durationUnit })
    .refine((c) => c.amount * UNIT_MINUTES[c.unit] <= MAX_DELAY_MINUTES, { message: 'A delay is at most 365 days', path: ['amount'] }),
  WAIT_FOR_EVENT: z.object({
    eventName: listenableEventName,
    timeout: z.number().int().positive().max(365 * 24 * 3600).optional().describe('Seconds; without it the step waits for ever'),
    emailStepId: z
      .string()
      .min(1)
      .optional()
      .describe(
        'For an email.* event: the SEND_EMAIL step whose email it must be about; default the last SEND_EMAIL this execution ran before the wait',
      ),
  }),
  CONDITION: z
    .object({
      field: z
        .string()
        .regex(/^(contact\.(email|subscribed)|data\.[^\s]+|event\.[^\s]+)$/, 'Use contact.email, contact.subscribed, data.<key> or event.<key>'),
      // No segment.<id> field here, so no membership operators.
      operator: z.enum(CONDITION_OPERATORS).exclude(['memberOfSegment', 'notMemberOfSegment']),
      value: z.union([z.string(), z.number(), z.boolean()]).optional(),
      unit: durationUnit.optional(),
    })
    .superRefine((c, ctx) => {
      if (!VALUELESS_OPERATORS.includes(c.operator) && c.value === undefined) {
        ctx.addIssue({ code: 'custom', path: ['value'], message: `The ${c.operator} operator needs a value` });
      }
      if (TIMED_OPERATORS.includes(c.operator) && (typeof c.value !== 'number' || c.unit === undefined)) {
        ctx.addIssue({ code: 'custom', path: ['unit'], message: `The ${c.operator} operator needs a numeric value and a unit` });
      }
    }),
  WEBHOOK: z.object({
    url: z.string().min(1).max(2000).describe('Templated; must render to an http(s) URL'),
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
    headers: z.record(z.string().min(1).max(255), z.string().max(2000)).optional(),
    body: z.string().max(100_000).optional().describe('Templated; default: contact, workflow, execution and context as JSON'),
  }),
  UPDATE_CONTACT: z
    .object({ updates: z.record(z.string().min(1).max(255), z.unknown()).optional(), subscribed: z.boolean().optional() })
    .refine((c) => c.updates !== undefined || c.subscribed !== undefined, { message: 'Give updates and/or subscribed' }),
  EXIT: z.object({ reason: z.string().max(500).optional() }),
} satisfies Record<UserStepType, z.ZodType>;

export type StepConfigs = { [K in UserStepType]: z.output<(typeof stepConfigSchemas)[K]> };

export const BRANCHES = ['yes', 'no', 'event', 'timeout'] as const;
export type Branch = (typeof BRANCHES)[number];

/** Which branch labels a source step may carry (null = unlabelled). */
export function allowedBranches(type: StepType): readonly (Branch | null)[] {
  if (type === 'CONDITION') return ['yes', 'no'];
  if (type === 'WAIT_FOR_EVENT') return [null, 'event', 'timeout'];
  return [null];
}

export type GraphStep = { [K in UserStepType]: { id: string; type: K; config: StepConfigs[K] } }[UserStepType] | {
  id: string;
  type: 'TRIGGER';
  config: { eventName: string };
};

/** The graph an execution runs, passed by value at start so later edits never reach it. */
export interface JourneyGraph {
  entryStepId: string;
  steps: Record<string, GraphStep>;
  transitions: { from: string; to: string; branch: Branch | null }[];
}

/** Minutes per DELAY unit, for the journey's timers. */
export const unitMinutes = (unit: z.infer<typeof durationUnit>) => UNIT_MINUTES[unit];
