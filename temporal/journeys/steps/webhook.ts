import { stepSummary, webhookActivities } from './proxies';
import type { StepHandler } from './types';

export const webhookStep: StepHandler<'WEBHOOK'> = async (config, ctx) => {
  // The URL template without its query, which may hold the receiver's credentials.
  const target = `${config.method} ${config.url.split('?')[0]}`;
  const response = await webhookActivities.callWebhook.executeWithOptions(stepSummary('WEBHOOK', ctx, target), [
    {
      projectId: ctx.input.projectId,
      contactId: ctx.input.contactId,
      workflowId: ctx.input.workflowId,
      executionId: ctx.input.executionId,
      stepId: ctx.stepId,
      config,
      context: ctx.context,
    },
  ]);
  return { output: { status: response.status } };
};
