import { journeyActivities } from './activities';
import type { StepHandler } from './types';

/** Applies `updates` with the custom-field rules, and/or the subscription state. */
export const updateContactStep: StepHandler<'UPDATE_CONTACT'> = async (config, ctx) => {
  await journeyActivities.updateJourneyContact({
    projectId: ctx.input.projectId,
    contactId: ctx.input.contactId,
    updates: config.updates,
    subscribed: config.subscribed,
  });
  return {};
};
