import { condition } from '@temporalio/workflow';
import type { TrackedEventMessage } from '../../signals';
import { stepSummary } from './proxies';
import type { StepHandler } from './types';

/**
 * Waits for the contact's next `eventName`, or the timeout. Only events tracked after the step
 * began count; the awaited event's data is merged into the execution context.
 */
export const waitForEventStep: StepHandler<'WAIT_FOR_EVENT'> = async (config, ctx) => {
  const since = Date.now(); // workflow time: deterministic on replay
  const seenBefore = ctx.events.length;
  const match = (): TrackedEventMessage | undefined =>
    ctx.events.slice(seenBefore).find((e) => e.name === config.eventName && Date.parse(e.trackedAt) >= since);
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
