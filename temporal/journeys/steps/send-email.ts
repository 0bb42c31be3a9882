import { PATCHES } from '../../patches';
import { deliveryActivities, journeyActivities, stepSummary } from './proxies';
import { journeyPatched } from '../journey-patched';
import { type StepHandler, type StepOutcome, sendEmailOutput } from './types';

/**
 * Queues the email (one row per execution + step) for the delivery engine, as /v1/send does, and
 * moves on: delivery, and its retries, are the engine's (GET /emails/:id, or the email's retry
 * workflow, say where it stands). The step never picks a branch, so the local activity that
 * queues the email also records the step's end and what follows, in the email's transaction.
 * Executions from before the engine deliver it themselves.
 */
export const sendEmailStep: StepHandler<'SEND_EMAIL'> = async (config, ctx): Promise<StepOutcome> => {
  const summary = stepSummary('SEND_EMAIL', ctx, `template ${config.templateId}`);
  const successor = ctx.successor && journeyPatched(ctx.input, PATCHES.journeySendRecordsTransition) ? ctx.successor : undefined;
  const queued = await journeyActivities.queueJourneyEmail.executeWithOptions(summary, [
    {
      executionId: ctx.input.executionId,
      seq: ctx.seq,
      projectId: ctx.input.projectId,
      contactId: ctx.input.contactId,
      templateId: config.templateId,
      recipient: config.recipient,
      context: ctx.context,
      ...(successor ? { successor } : {}),
    },
  ]);
  if (queued.emailId) {
    ctx.emails.byStep.set(ctx.stepId, queued.emailId);
    ctx.emails.last = queued.emailId;
  }
  if (successor) return { output: sendEmailOutput(queued), transitionRecorded: true };
  if (!queued.emailId) return { output: sendEmailOutput(queued) };
  if (journeyPatched(ctx.input, PATCHES.journeySendViaEngine)) return { output: sendEmailOutput(queued) };
  const outcome = await deliveryActivities(ctx.input).deliverEmail.executeWithOptions(summary, [queued.emailId]);
  if (outcome.delivered && !outcome.recorded) {
    await journeyActivities.recordEmailSent.executeWithOptions(summary, [queued.emailId, outcome.smtpResponse]);
  }
  return { output: sendEmailOutput(queued) };
};
