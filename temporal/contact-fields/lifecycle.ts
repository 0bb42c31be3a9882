import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import { fieldSlotsWantedSignal } from '../signals';
import type { deleteContactField as deleteContactFieldWorkflow, prepareFieldSlots } from './workflow';

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

/** Asks for the slot columns of the fields the project's segments name; joins a preparation under way. */
export async function requestFieldSlots(temporal: TemporalGateway, projectId: string): Promise<void> {
  await temporal.client.workflow.signalWithStart<typeof prepareFieldSlots>('prepareFieldSlots', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.fieldSlots(projectId),
    args: [{ projectId }],
    signal: fieldSlotsWantedSignal,
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
    staticSummary: 'slot columns for the fields segments name',
  });
}
