import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import type { contactImport } from './workflow';

/** Starts the import job's workflow; a repeat for the same job joins the one under way. */
export async function startContactImport(temporal: TemporalGateway, projectId: string, jobId: string): Promise<void> {
  await temporal.client.workflow.start<typeof contactImport>('contactImport', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.contactImport(jobId),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    args: [{ jobId }],
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
    staticSummary: `contact import job ${jobId}`,
  });
}
