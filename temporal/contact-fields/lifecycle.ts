import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import type { deleteContactField as deleteContactFieldWorkflow } from './workflow';

/** Removes a custom field from every contact and waits for it; a second request for the same field joins the deletion already running. */
export async function deleteContactField(temporal: TemporalGateway, projectId: string, key: string): Promise<{ removed: number }> {
  const handle = await temporal.client.workflow.start<typeof deleteContactFieldWorkflow>('deleteContactField', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.deleteContactField(projectId, key),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    args: [{ projectId, key }],
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
    staticSummary: `delete contact field "${key}"`,
  });
  return handle.result();
}
