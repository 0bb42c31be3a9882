import { condition } from '@temporalio/workflow';
import type { TrackedEventMessage } from '../../signals';
import { stepSummary } from './proxies';
import type { StepContext, StepHandler } from './types';

/** Events about one email we sent; email.received is mail from the contact, not about ours. */
const isAboutAnEmail = (name: string) => name.startsWith('email.') && name !== 'email.received';

/**
 * Waits for the contact's next `eventName`, or the timeout; the awaited event's data is merged
 * into the execution context. An event about an email waits for this execution's own email (the
 * step named by `emailStepId`, else the last one it sent) and takes it whenever it came, even
 * before the step began; any other event counts only if it came after the step began.
 */
export const waitForEventStep: StepHandler<'WAIT_FOR_EVENT'> = async (config, ctx) => {
  const match = matcher(config, ctx);
  const arrived = () => match() !== undefined;
  if (config.timeout === undefined) await condition(arrived);
  else {
    const summary = stepSummary('WAIT_FOR_EVENT', ctx, `${config.eventName}, timeout ${config.timeout} s`);
    if (!(await condition(arrived, config.timeout * 1000 * ctx.input.timeScale, summary))) return { branch: 'timeout' };
  }
  const event = match()!;
  Object.assign(ctx.context, event.data);
  return { branch: 'event', output: { eventId: event.eventId } };
};

function matcher(config: { eventName: string; emailStepId?: string }, ctx: StepContext): () => TrackedEventMessage | undefined {
  const emailId = isAboutAnEmail(config.eventName)
    ? config.emailStepId !== undefined
      ? ctx.emails.byStep.get(config.emailStepId)
      : ctx.emails.last
    : undefined;
  if (emailId !== undefined) return () => ctx.events.find((e) => e.name === config.eventName && e.data.emailId === emailId);
  // Workflow time: deterministic on replay.
  const since = ctx.began?.at ?? Date.now();
  const seenBefore = ctx.began?.eventsSeen ?? ctx.events.length;
  return () => ctx.events.slice(seenBefore).find((e) => e.name === config.eventName && Date.parse(e.trackedAt) >= since);
}
