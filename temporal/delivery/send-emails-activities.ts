import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Config } from '../../config';
import { claimForWorkflow } from '../../db/messages/delivery-queue';
import { loadEmailForDelivery, markEmailFailed, markEmailRetrying, markEmailSent, retriesRunOut } from '../../db/messages/emails';
import { recordRelayBounces } from '../../db/messages/engagement';
import { takeSendSlot } from '../../db/messages/send-throttle';
import type { Orm } from '../../db/orm';
import { PROJECT_DISABLED_ERROR } from '../../db/projects/security';
import { SUPPRESSED_ERROR } from '../../db/contacts/suppressions';
import { sendStoredEmail } from '../../mail/send-stored';
import type { Mailer } from '../../mail/transport';
import { retryLeaseSeconds, SMTP_PERMANENT_ERROR } from '../delivery-options';
import { smtpPermanentFailure } from '../failures';

export type DeliveryOutcome =
  /** `recorded`: already marked SENT; otherwise the workflow records it with recordEmailSent. */
  | { delivered: true; smtpResponse: string; recorded?: boolean }
  | { delivered: false; reason: 'already_sent' | 'missing' | 'suppressed' | 'project_disabled' };

export function createSendActivities({ orm, mailer, config }: { orm: Orm; mailer: Mailer; config: Pick<Config, 'sendRetryMaxIntervalSeconds' | 'sendRetryForSeconds'> }) {
  // Held across the attempt and the backoff before the next one, so the engine leaves the email to this workflow.
  const leaseSeconds = retryLeaseSeconds(config);
  return {
    /**
     * The per-email retry workflow's attempt (workflowIds.sendEmails; also what executions from
     * before the delivery engine run). Hands one email to the relay, then marks it SENT at once:
     * an attempt retried after this worker dies finds it SENT and does not send it again, so the
     * duplicate window is the moment between the relay's acceptance and that commit. A failure to
     * record is not a failure to send: the workflow then records it with recordEmailSent.
     */
    async deliverEmail(emailId: string): Promise<DeliveryOutcome> {
      const em = orm.em.fork();
      const found = await loadEmailForDelivery(em, emailId);
      if (!found) {
        // Executions from before the delivery engine were started inside the transaction that
        // wrote the rows, so their first attempts may run before that commit; only a row missing
        // for good ends delivery.
        if (Context.current().info.attempt < 10) throw ApplicationFailure.retryable(`Email ${emailId} not visible yet`);
        return { delivered: false, reason: 'missing' };
      }
      if (found.status !== 'QUEUED' && found.status !== 'SENDING') return { delivered: false, reason: 'already_sent' };
      // A hard-bounced or complaining address (db/contacts/suppressions.ts) is never handed to the relay.
      if (found.suppressed) {
        await markEmailFailed(em, emailId, SUPPRESSED_ERROR);
        return { delivered: false, reason: 'suppressed' };
      }
      // A disabled project sends nothing (db/projects/security.ts): the email fails, it is not held.
      if (found.projectDisabled) {
        await markEmailFailed(em, emailId, PROJECT_DISABLED_ERROR);
        return { delivered: false, reason: 'project_disabled' };
      }
      // A project with a send rate of its own keeps to it on retries too: try again when its clock has a slot.
      const throttledMs = await takeSendSlot(em, found.projectId);
      if (throttledMs > 0) throw ApplicationFailure.create({ message: `Project ${found.projectId} is throttled`, nextRetryDelay: throttledMs });
      // An engine sending it right now holds the lease: try again shortly, and find it settled.
      if (!(await claimForWorkflow(em, emailId, leaseSeconds))) throw ApplicationFailure.retryable(`Email ${emailId} is being sent by the delivery engine`);
      const beat = setInterval(() => Context.current().heartbeat(), 5_000);
      const outcome = await sendStoredEmail(mailer, found.email, found.dkim).finally(() => clearInterval(beat));
      switch (outcome.kind) {
        case 'sent':
          break;
        case 'bounced':
          await recordRelayBounces(em, [{ emailId, reply: outcome.reply }]);
          throw smtpPermanentFailure(outcome.error);
        case 'rejected':
          await markEmailFailed(em, emailId, outcome.reply, outcome.reply);
          throw smtpPermanentFailure(outcome.error);
        default: {
          const message = outcome.kind === 'transient' ? outcome.message : outcome.reply;
          // A relay that kept deferring the message (4xx) past the retry period: a soft bounce, no more tries.
          const deferred = outcome.kind === 'transient' && outcome.answered && outcome.reply !== null;
          if (deferred && (await retriesRunOut(em, emailId, config.sendRetryForSeconds))) {
            await recordRelayBounces(em, [{ emailId, reply: outcome.reply!, bounceType: 'soft' }]);
            throw ApplicationFailure.nonRetryable(message, SMTP_PERMANENT_ERROR);
          }
          // Retried by Temporal; the row says why meanwhile. Failing to say so must not replace the cause.
          await markEmailRetrying(em, emailId, message, outcome.reply).catch((recordErr: unknown) =>
            Context.current().log.warn('Recording a failed attempt failed', { emailId, error: String(recordErr) }),
          );
          throw outcome.error;
        }
      }
      const smtpResponse = outcome.reply;
      const recorded = await markEmailSent(em, emailId, smtpResponse).then(
        () => true,
        (err: unknown) => {
          Context.current().log.warn('Recording SENT failed; the workflow retries it', { emailId, error: String(err) });
          return false;
        },
      );
      return { delivered: true, smtpResponse, recorded };
    },

    async recordEmailSent(emailId: string, smtpResponse: string): Promise<void> {
      await markEmailSent(orm.em.fork(), emailId, smtpResponse);
    },
  };
}

export type SendActivities = ReturnType<typeof createSendActivities>;
