import { webhookActivities } from './activities';
import type { StepHandler } from './types';

export const webhookStep: StepHandler<'WEBHOOK'> = async (config, ctx) => {
  const response = await webhookActivities.callWebhook({
    projectId: ctx.input.projectId,
    contactId: ctx.input.contactId,
    workflowId: ctx.input.workflowId,
    executionId: ctx.input.executionId,
    stepId: ctx.stepId,
    config,
    context: ctx.context,
  });
  return { output: { status: response.status } };
};
