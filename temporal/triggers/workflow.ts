import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { TriggerDispatcherActivities } from './activities';

export interface TriggerDispatcherInput {
  /** The task queue whose tracked events this dispatcher delivers (trigger_outbox.queue). */
  queue: string;
  /** Each round (one activity) takes new rows for this long. */
  roundSeconds: number;
}

const ROUNDS_PER_RUN = 500;

/**
 * The trigger dispatcher of a task queue, running for as long as the service does (started by
 * every worker, temporal/engines.ts): round after round, one long-running activity delivers the
 * tracked events the API wrote to the outbox — signals to waiting executions, starts of the
 * journeys they trigger (temporal/triggers/activities.ts). One per queue keeps each
 * contact's events in order.
 */
export async function triggerDispatcher(input: TriggerDispatcherInput): Promise<void> {
  const { dispatchTriggers } = proxyActivities<TriggerDispatcherActivities>({
    startToCloseTimeout: `${input.roundSeconds + 120} seconds`,
    heartbeatTimeout: '10 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
  });
  for (let round = 0; round < ROUNDS_PER_RUN && !workflowInfo().continueAsNewSuggested; round++) {
    await dispatchTriggers({ queue: input.queue, maxSeconds: input.roundSeconds });
  }
  await continueAsNew<typeof triggerDispatcher>(input);
}
