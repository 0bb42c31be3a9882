import { deliveryActivities, journeyActivities, stepSummary } from './activities';
import type { StepHandler, StepOutcome } from './types';

/** Queues the email through the same rows and activities as /v1/send; keyed by execution + step. */
export const sendEmailStep: StepHandler<'SEND_EMAIL'> = async (config, ctx): Promise<StepOutcome> => {
  const summary = stepSummary('SEND_EMAIL', ctx, `template ${config.templateId}`);
  const queued = await journeyActivities.queueJourneyEmail.executeWithOptions(summary, [
    {
      executionId: ctx.input.executionId,
      seq: ctx.seq,
      projectId: ctx.input.projectId,
      contactId: ctx.input.contactId,
      templateId: config.templateId,
      recipient: config.recipient,
      context: ctx.context,
    },
  ]);
  if (!queued.emailId) return { output: { skipped: queued.skipped ?? 'unknown' } };
  const outcome = await deliveryActivities(ctx.input).deliverEmail.executeWithOptions(summary, [queued.emailId]);
  if (outcome.delivered && !outcome.recorded) {
    await journeyActivities.recordEmailSent.executeWithOptions(summary, [queued.emailId, outcome.smtpResponse]);
  }
  return { output: { emailId: queued.emailId } };
};
