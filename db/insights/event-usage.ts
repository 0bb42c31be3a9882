import type { EntityManager } from '@mikro-orm/postgresql';
import { campaignsTargeting } from '../campaigns/campaigns';
import { type EventWorkflowUsage, workflowsUsingEvent } from '../journeys/journeys';
import { segmentsUsingEvent } from '../segments/segments';

export interface EventUsage extends EventWorkflowUsage {
  eventName: string;
  /** Segments with a filter on `event.<name>`. */
  segments: { id: string; name: string }[];
  /** Campaigns addressing one of those segments. */
  campaigns: { id: string; name: string; status: string }[];
}

/** Where a name is referenced. It need not have been tracked: a workflow may wait for it first. */
export async function eventUsage(em: EntityManager, projectId: string, name: string): Promise<EventUsage> {
  const [workflows, segments] = await Promise.all([workflowsUsingEvent(em, projectId, name), segmentsUsingEvent(em, projectId, name)]);
  return { eventName: name, ...workflows, segments, campaigns: await campaignsTargeting(em, projectId, segments.map((s) => s.id)) };
}
