import { type Client, WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Config } from '../config';
import { deliveryTuning } from './delivery/tuning';
import { workflowIds } from './ids';
import type { deliveryEngine, triggerDispatcher } from './workflows';

/** A round of the trigger dispatcher takes new work for this long before the workflow starts the next one. */
const ROUND_SECONDS = 60;

/**
 * Starts the long-running workflows that drain a task queue's outbox (docs/design.md, "One
 * delivery engine"), unless they already run: every worker calls this when it starts, so a fresh
 * deployment, a restored server or a terminated engine gets them back with the next worker.
 */
export async function ensureEngines(client: Client, taskQueue: string, config: Pick<Config, 'delivery' | 'sendRetryMaxIntervalSeconds'>): Promise<void> {
  const delivery = deliveryTuning(config);
  await Promise.all([
    client.workflow.start<typeof triggerDispatcher>('triggerDispatcher', {
      taskQueue,
      workflowId: workflowIds.triggerDispatcher(taskQueue),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ queue: taskQueue, roundSeconds: ROUND_SECONDS }],
      staticSummary: `trigger dispatcher for task queue ${taskQueue}`,
    }),
    ...Array.from({ length: delivery.engines }, (_, index) =>
      client.workflow.start<typeof deliveryEngine>('deliveryEngine', {
        taskQueue,
        workflowId: workflowIds.deliveryEngine(taskQueue, index),
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
        args: [{ queue: taskQueue, index, roundSeconds: delivery.roundSeconds, maxRetryIntervalSeconds: delivery.retryMaxIntervalSeconds }],
        staticSummary: `delivery engine ${index + 1} of ${delivery.engines} for task queue ${taskQueue}`,
      }),
    ),
  ]);
}
