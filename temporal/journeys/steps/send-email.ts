import { patched } from '@temporalio/workflow';
import { PATCHES } from '../../patches';
import { deliveryActivities, journeyActivities, stepSummary } from './proxies';
import type { StepHandler, StepOutcome } from './types';

/**
 * Queues the email (one row per execution + step) for the delivery engine, as /v1/send does, and
 * moves on: delivery, and its retries, are the engine's (GET /emails/:id, or the email's retry
 * workflow, say where it stands). Executions from before the engine deliver it themselves.
 */
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
  if (patched(PATCHES.journeySendViaEngine)) return { output: { emailId: queued.emailId } };
  const outcome = await deliveryActivities(ctx.input).deliverEmail.executeWithOptions(summary, [queued.emailId]);
  if (outcome.delivered && !outcome.recorded) {
    await journeyActivities.recordEmailSent.executeWithOptions(summary, [queued.emailId, outcome.smtpResponse]);
  }
  return { output: { emailId: queued.emailId } };
};
