import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { UserStepType } from '../../../db/journeys/steps';
import type { Activities } from '../../activities';
import { deliveryOptions } from '../../delivery-options';
import type { JourneyInput, StepContext } from './types';

/**
 * Bookkeeping and data steps: short database work, retried until it succeeds. Local activities
 * run in the worker that runs the workflow, with no task-queue round trip: an execution makes a
 * dozen of these, and as regular activities they cost more server work than the steps themselves.
 */
export const journeyActivities = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * Call-site options naming the step an activity or timer belongs to: the one line the Temporal UI
 * shows for it. User metadata only, so adding or changing it leaves replays deterministic.
 */
export function stepSummary(type: UserStepType, ctx: StepContext, detail?: string): { summary: string } {
  return { summary: `${type} step ${ctx.stepId}${detail === undefined ? '' : `: ${detail}`}` };
}

/** Delivery as for /v1/send, with the execution's ceiling between attempts. */
export const deliveryActivities = (input: JourneyInput) => proxyActivities<Activities>(deliveryOptions(input.maxRetryIntervalSeconds ?? 300));

/** A webhook call has its own 10 s timeout inside; 5xx and network errors retry a few times. */
export const webhookActivities = proxyActivities<Activities>({
  startToCloseTimeout: '20 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumAttempts: 6,
    nonRetryableErrorTypes: ['WebhookClientError', 'WebhookRefused'],
  },
});
