import { z } from 'zod';
import { listenableEventName } from '../../db/events/catalogue';
import { EXECUTION_STATUSES } from '../../db/journeys/executions';
import { cursorQuery } from './common';

export const journeyIdParams = z.object({ id: z.string().min(1) });
export const executionParams = z.object({ id: z.string().min(1), executionId: z.string().min(1) });

const executionContext = z.record(z.string(), z.unknown()).describe('Per-execution variables, available to templates and conditions');

export const startExecutionBody = z.object({
  contactId: z.string().min(1),
  context: executionContext.optional(),
});

/** The most a test run compresses time: a day of the journey in a second. */
export const MAX_TEST_TIME_SCALE = 86_400;

export const startTestRunBody = z.object({
  contactId: z.string().min(1).describe('The contact the test run is for; its mail goes to this contact as in a real execution'),
  timeScale: z
    .number()
    .min(1)
    .max(MAX_TEST_TIME_SCALE)
    .default(60)
    .describe('Every DELAY and WAIT_FOR_EVENT timeout of the journey is divided by this: at 60 a minute lasts a second, at 3600 an hour does, at 86400 a day'),
  context: executionContext.optional(),
});

export const simulateEventBody = z.object({
  event: listenableEventName.describe(
    'The event name, as tracked (`POST /v1/track`) or as the service records it (`email.opened`, `email.clicked`… `GET /events/system`)',
  ),
  data: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      'The event data, merged into the execution context when a WAIT_FOR_EVENT takes it. For an event about an email without `emailId`, the email the current wait waits for',
    ),
});

export const simulateEventResponse = z
  .object({
    delivered: z
      .boolean()
      .describe('true: the test run received the event (a WAIT_FOR_EVENT for this name takes it); false: its workflow had just ended'),
  })
  .meta({ id: 'SimulatedEventDelivery' });

export const listExecutionsQuery = cursorQuery.extend({
  status: z.enum(EXECUTION_STATUSES).optional(),
  test: z
    .enum(['true', 'false'])
    .optional()
    .describe('true: only test runs; false: only real executions; absent: both')
    .transform((v) => (v === undefined ? undefined : v === 'true')),
});

const stepRecord = z.object({
  seq: z.number().int(),
  stepId: z.string(),
  stepType: z.string(),
  status: z.enum(['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED']),
  branch: z.string().nullable(),
  output: z.unknown(),
  error: z.string().nullable(),
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
});

const temporalLink = z
  .object({
    workflowId: z.string().describe('The Temporal workflow id of the execution'),
    runId: z.string().nullable().describe('Its run id, when the API started it (test runs, POST /workflows/{id}/executions); null for executions a trigger started'),
    url: z
      .string()
      .nullable()
      .describe('Opens the execution in the Temporal Web UI; null when the service does not know where the Web UI is (TEMPORAL_UI_URL)'),
  })
  .describe('Where the execution runs in Temporal');

export const executionSchema = z
  .object({
    id: z.string(),
    workflowId: z.string(),
    contactId: z.string(),
    status: z.enum(EXECUTION_STATUSES),
    currentStepId: z.string().nullable(),
    waitingForEvent: z.string().nullable(),
    context: z.record(z.string(), z.unknown()),
    exitReason: z.string().nullable(),
    error: z.string().nullable(),
    startedAt: z.string(),
    finishedAt: z.string().nullable(),
    test: z.boolean().describe('A test run (POST /workflows/{id}/test-runs): not an entry of its contact, and not counted in the activity figures'),
    timeScale: z.number().describe("What the execution's timers are divided by: the test run's timeScale; 1 for real executions"),
    temporal: temporalLink,
    steps: z.array(stepRecord).optional().describe('Step history, on GET of one execution'),
  })
  .meta({ id: 'Execution' });
