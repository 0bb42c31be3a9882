import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import { deliveryOptions } from '../delivery-options';

/**
 * Bookkeeping and data steps: short database work, retried until it succeeds. Local activities
 * run in the worker that runs the workflow, with no task-queue round trip: an execution makes a
 * dozen of these, and as regular activities they cost more server work than the steps themselves.
 */
export const journeyActivities = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/** Delivery as for /v1/send (a 5-minute ceiling between attempts). */
export const deliveryActivities = proxyActivities<Activities>(deliveryOptions(300));

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
