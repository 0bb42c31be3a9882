import { continueAsNew, ParentClosePolicy, patched, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import { PATCHES } from '../patches';
import type { DeliverSegmentEventsInput, SegmentActivities } from './activities';
import { ProjectIdKey } from '../search-attributes';

const { applySegmentMembership } = proxyActivities<SegmentActivities>({
  // One statement over the project's contacts: minutes for millions of them.
  startToCloseTimeout: '30 minutes',
  retry: { maximumAttempts: 5 },
});

const { deliverSegmentEvents } = proxyActivities<SegmentActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '1 minute',
  retry: { maximumAttempts: 10 },
});

export interface SegmentComputeInput {
  projectId: string;
  segmentId: string;
}

const DELIVERY_BATCH = 500;

/**
 * POST /segments/:id/compute. The membership diff is one activity (one transaction), which records
 * the entry/exit events through the one event path (db/record-events.ts): they start journeys and
 * wake waits like any event, however many there are.
 */
export async function segmentCompute(input: SegmentComputeInput): Promise<{ added: number; removed: number; total: number }> {
  const info = workflowInfo();
  const outcome = await applySegmentMembership({ ...input, computeId: `${info.workflowId}/${info.runId}` });
  // The events now reach journeys through the trigger outbox, written with them; a compute from
  // before that delivers its own in a child, as it did.
  if (!patched(PATCHES.segmentEventsInOutbox) && outcome.events) {
    await startChild(segmentEventDelivery, {
      workflowId: `${info.workflowId}:events:${outcome.events.firstId}`,
      args: [{ ...input, ...outcome.events, after: null, limit: DELIVERY_BATCH }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: [{ key: ProjectIdKey, value: input.projectId }],
    });
  }
  return { added: outcome.added, removed: outcome.removed, total: outcome.total };
}

/**
 * Delivers the entry/exit events of a compute from before the trigger outbox (PATCHES.segmentEventsInOutbox)
 * to workflows, a page per activity, in id order.
 */
export async function segmentEventDelivery(input: DeliverSegmentEventsInput): Promise<{ delivered: number }> {
  let after = input.after;
  let delivered = 0;
  for (;;) {
    const page = await deliverSegmentEvents({ ...input, after });
    delivered += page.delivered;
    if (page.lastId === null || page.delivered < input.limit) return { delivered };
    after = page.lastId;
    if (workflowInfo().continueAsNewSuggested) await continueAsNew<typeof segmentEventDelivery>({ ...input, after });
  }
}
