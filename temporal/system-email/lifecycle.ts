import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import type { sendSystemEmail as sendSystemEmailWorkflow } from './workflow';

/** Delivers one stored account email; its id is the row's, so a repeat cannot mail twice. */
export async function sendSystemEmail(temporal: TemporalGateway, systemEmailId: string): Promise<void> {
  await temporal.client.workflow.start<typeof sendSystemEmailWorkflow>('sendSystemEmail', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.systemEmail(systemEmailId),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    args: [{ systemEmailId, maxRetryIntervalSeconds: temporal.config.sendRetryMaxIntervalSeconds }],
    staticSummary: `account email ${systemEmailId}`,
  });
}
