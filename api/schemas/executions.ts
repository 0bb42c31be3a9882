import { z } from 'zod';
import { EXECUTION_STATUSES } from '../../db/journeys/executions';
import { cursorQuery } from './common';

export const journeyIdParams = z.object({ id: z.string().min(1) });
export const executionParams = z.object({ id: z.string().min(1), executionId: z.string().min(1) });

export const startExecutionBody = z.object({
  contactId: z.string().min(1),
  context: z.record(z.string(), z.unknown()).optional().describe('Per-execution variables, available to templates and conditions'),
});

export const listExecutionsQuery = cursorQuery.extend({ status: z.enum(EXECUTION_STATUSES).optional() });

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
    steps: z.array(stepRecord).optional().describe('Step history, on GET of one execution'),
  })
  .meta({ id: 'Execution' });
