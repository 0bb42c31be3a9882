import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../../activities';

/** Bookkeeping and data steps: quick database work, retried until it succeeds. */
export const journeyActivities = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/** Delivery retries like /v1/send: transient SMTP failures for as long as it takes, 5xx never. */
export const deliveryActivities = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '5 minutes',
    nonRetryableErrorTypes: ['SmtpPermanentError'],
  },
});

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
