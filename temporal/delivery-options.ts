import type { ActivityOptions } from '@temporalio/workflow';

/** The failure type of a 5xx SMTP reply (temporal/failures.ts): never retried. */
export const SMTP_PERMANENT_ERROR = 'SmtpPermanentError';

/**
 * How the retry workflow's delivery attempts run: transient SMTP failures retry with backoff
 * (until SEND_RETRY_FOR_SECONDS, then a soft bounce), a 5xx reply never; the activity heartbeats
 * while it talks to the relay, so a dead worker is noticed in seconds.
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

/**
 * How long an email handed to its retry workflow stays leased to it: the longest backoff between
 * attempts and a margin, so no engine claims it between two attempts.
 */
export const retryLeaseSeconds = (config: { sendRetryMaxIntervalSeconds: number }) => config.sendRetryMaxIntervalSeconds + 120;
