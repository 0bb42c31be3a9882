import { deliveryActivities, journeyActivities } from './activities';
import type { StepHandler, StepOutcome } from './types';

/** Queues the email through the same rows and activities as /v1/send; keyed by execution + step. */
export const sendEmailStep: StepHandler<'SEND_EMAIL'> = async (config, ctx): Promise<StepOutcome> => {
  const queued = await journeyActivities.queueJourneyEmail({
    executionId: ctx.input.executionId,
    seq: ctx.seq,
    projectId: ctx.input.projectId,
    contactId: ctx.input.contactId,
    templateId: config.templateId,
    recipient: config.recipient,
    context: ctx.context,
  });
  if (!queued.emailId) return { output: { skipped: queued.skipped ?? 'unknown' } };
  const outcome = await deliveryActivities.deliverEmail(queued.emailId);
  if (outcome.delivered && !outcome.recorded) await journeyActivities.recordEmailSent(queued.emailId, outcome.smtpResponse);
  return { output: { emailId: queued.emailId } };
};
