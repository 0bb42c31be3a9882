import type { ActivityOptions } from '@temporalio/workflow';

/** The failure type of a 5xx SMTP reply (temporal/failures.ts): never retried. */
export const SMTP_PERMANENT_ERROR = 'SmtpPermanentError';

/**
 * How email delivery activities run, for /v1/send and journeys alike: transient SMTP failures
 * retry with backoff for as long as it takes, a 5xx reply never; the activity heartbeats while
 * it talks to the relay, so a dead worker is noticed in seconds.
 */
export const deliveryOptions = (maxRetryIntervalSeconds: number): ActivityOptions => ({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '20 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: `${maxRetryIntervalSeconds} seconds`,
    nonRetryableErrorTypes: [SMTP_PERMANENT_ERROR],
  },
});
