import type { EntityManager } from '@mikro-orm/postgresql';
import { campaignsTargeting } from '../campaigns/campaigns';
import { type EventJourneyUsage, journeysUsingEvent } from '../journeys/lookups';
import { segmentsUsingEvent } from '../segments/usage';

export interface EventUsage extends EventJourneyUsage {
  eventName: string;
  /** Segments with a filter on `event.<name>`. */
  segments: { id: string; name: string }[];
  /** Campaigns addressing one of those segments. */
  campaigns: { id: string; name: string; status: string }[];
}

/** Where a name is referenced. It need not have been tracked: a journey may wait for it first. */
export async function eventUsage(em: EntityManager, projectId: string, name: string): Promise<EventUsage> {
  const [journeys, segments] = await Promise.all([journeysUsingEvent(em, projectId, name), segmentsUsingEvent(em, projectId, name)]);
  return { eventName: name, ...journeys, segments, campaigns: await campaignsTargeting(em, projectId, segments.map((s) => s.id)) };
}
