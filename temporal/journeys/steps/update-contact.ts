import { journeyActivities, stepSummary } from './proxies';
import type { StepHandler } from './types';

/** Applies `updates` with the custom-field rules, and/or the subscription state. */
export const updateContactStep: StepHandler<'UPDATE_CONTACT'> = async (config, ctx) => {
  const changes = [...Object.keys(config.updates ?? {}), ...(config.subscribed === undefined ? [] : ['subscribed'])];
  await journeyActivities.updateJourneyContact.executeWithOptions(stepSummary('UPDATE_CONTACT', ctx, changes.join(', ')), [
    {
      projectId: ctx.input.projectId,
      contactId: ctx.input.contactId,
      updates: config.updates,
      subscribed: config.subscribed,
    },
  ]);
  return {};
};
