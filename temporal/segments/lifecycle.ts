import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import type { segmentCompute } from './workflow';

/**
 * Recomputes a tracked dynamic segment and returns the diff; entry/exit events are delivered by a
 * child workflow afterwards. A second request while one runs joins it.
 */
export async function computeSegment(
  temporal: TemporalGateway,
  projectId: string,
  segmentId: string,
): Promise<{ added: number; removed: number; total: number }> {
  const handle = await temporal.client.workflow.start<typeof segmentCompute>('segmentCompute', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.segmentCompute(segmentId),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    args: [{ projectId, segmentId }],
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
    staticSummary: `segment ${segmentId} recompute`,
  });
  return handle.result();
}
