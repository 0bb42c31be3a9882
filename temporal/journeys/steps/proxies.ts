import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { UserStepType } from '../../../db/journeys/steps';
import type { SendActivities } from '../../delivery/send-emails-activities';
import { deliveryOptions } from '../../delivery-options';
import type { JourneyActivities } from '../activities';
import type { ConditionActivities } from '../condition-activities';
import type { WebhookActivities } from '../webhooks';
import type { JourneyInput, StepContext } from './types';

/**
 * Bookkeeping and data steps: short database work, retried until it succeeds. Local activities
 * run in the worker that runs the workflow, with no task-queue round trip: an execution makes a
 * dozen of these, and as regular activities they cost more server work than the steps themselves.
 * recordEmailSent is /v1/send's, for the executions deliveryActivities still serves.
 */
export const journeyActivities = proxyLocalActivities<JourneyActivities & ConditionActivities & Pick<SendActivities, 'recordEmailSent'>>({
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

/**
 * Delivery as for /v1/send, with the execution's ceiling between attempts: the activities of
 * temporal/delivery/send-emails-activities.ts, which SEND_EMAIL steps of executions from before
 * the delivery engine still call (send-email.ts).
 */
export const deliveryActivities = (input: JourneyInput) => proxyActivities<Pick<SendActivities, 'deliverEmail'>>(deliveryOptions(input.maxRetryIntervalSeconds ?? 300));

/** A webhook call has its own 10 s timeout inside; 5xx and network errors retry a few times. */
export const webhookActivities = proxyActivities<WebhookActivities>({
  startToCloseTimeout: '20 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumAttempts: 6,
    nonRetryableErrorTypes: ['WebhookClientError', 'WebhookRefused'],
  },
});
