import { journeyActivities, stepSummary } from './proxies';
import type { StepHandler } from './types';

/** Evaluated on the contact's current data and the execution context. */
export const conditionStep: StepHandler<'CONDITION'> = async (config, ctx) => {
  const { result } = await journeyActivities.evaluateCondition.executeWithOptions(stepSummary('CONDITION', ctx), [
    {
      projectId: ctx.input.projectId,
      contactId: ctx.input.contactId,
      condition: config,
      context: ctx.context,
    },
  ]);
  return { branch: result ? 'yes' : 'no', output: { result } };
};
