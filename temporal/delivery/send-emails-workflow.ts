import { patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { SendActivities } from './send-emails-activities';
import { deliveryOptions } from '../delivery-options';
import { PATCHES } from '../patches';

export interface SendEmailsInput {
  emailIds: string[];
  /** Longest wait between delivery attempts while the relay is down (5 minutes in production). */
  maxRetryIntervalSeconds: number;
}

/**
 * An email's retry workflow (workflowIds.sendEmails), started by the delivery engine after a
 * transient failure (executions from before the engine carry every email of one /v1/send request).
 * Transient SMTP failures retry with backoff until SEND_RETRY_FOR_SECONDS, then soft-bounce; a 5xx
 * reply is final (BOUNCED when the relay refused the recipient, FAILED otherwise: mail/smtp-errors.ts).
 */
export async function sendEmails(input: SendEmailsInput): Promise<void> {
  const { deliverEmail } = proxyActivities<SendActivities>(deliveryOptions(input.maxRetryIntervalSeconds));
  const recordOptions = { startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumInterval: '1 minute' } } as const;
  // Local: no task-queue round trip, and its retries cannot send again, since deliverEmail's
  // result is already in the history. Executions started before this change recorded SENT with a
  // regular activity and must replay that way (test/service/replay.test.ts).
  const { recordEmailSent } = patched(PATCHES.recordSentLocally)
    ? proxyLocalActivities<SendActivities>(recordOptions)
    : proxyActivities<SendActivities>(recordOptions);
  await Promise.all(
    input.emailIds.map(async (emailId) => {
      const outcome = await deliverEmail(emailId);
      if (outcome.delivered && !outcome.recorded) await recordEmailSent(emailId, outcome.smtpResponse);
    }),
  );
}
