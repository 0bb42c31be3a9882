import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import type { bulkContacts } from './workflow';

/** Starts the workflow of a bulk contact job; its id is the job's, so a repeat joins it. */
export async function startBulkContacts(temporal: TemporalGateway, projectId: string, jobId: string): Promise<void> {
  await temporal.client.workflow.start<typeof bulkContacts>('bulkContacts', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.bulkContacts(jobId),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    args: [{ jobId }],
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
    staticSummary: `bulk contact job ${jobId}`,
  });
}
