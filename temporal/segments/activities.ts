import { Context } from '@temporalio/activity';
import type { Config } from '../../config';
import { journeysTriggeredBy } from '../../db/journeys/executions';
import type { Orm } from '../../db/orm';
import { applySegmentMembership, type ComputeOutcome, contactsWithActiveExecutions, membershipEventsPage } from '../../db/segments/membership';
import { TemporalGateway } from '../client';
import { permanent } from '../failures';
import { deliverTrackedEvent } from '../triggers/dispatch';

export interface DeliverSegmentEventsInput {
  projectId: string;
  segmentId: string;
  names: string[];
  firstId: string;
  lastId: string;
  /** Last event already delivered (exclusive); null to start at firstId. */
  after: string | null;
  limit: number;
}

export function createSegmentActivities({ orm, config }: { orm: Orm; config: Config }) {
  return {
    /** Diffs and writes a tracked dynamic segment's membership and its entry/exit events (db/segments/membership.ts). */
    async applySegmentMembership(input: { projectId: string; segmentId: string; computeId: string }): Promise<ComputeOutcome> {
      // Gone, or no longer tracked / dynamic: a retry would not change that.
      return permanent(applySegmentMembership(orm.em.fork(), input));
    },

    /**
     * Delivers one page of the entry/exit events of a compute from before the trigger outbox, as any tracked event is delivered
     * (temporal/triggers/dispatch.ts): to the contact's running executions, and to the workflows the name
     * triggers. Contacts with neither are skipped without a query each. Heartbeats carry the last
     * event delivered, so a retried attempt resumes after it.
     */
    async deliverSegmentEvents(input: DeliverSegmentEventsInput): Promise<{ delivered: number; lastId: string | null }> {
      const ctx = Context.current();
      const em = orm.em.fork();
      const resumedAfter = typeof ctx.info.heartbeatDetails === 'string' ? (ctx.info.heartbeatDetails as string) : null;
      const events = await membershipEventsPage(em, { ...input, after: resumedAfter ?? input.after });
      if (events.length === 0) return { delivered: 0, lastId: null };
      const triggers = new Map(
        await Promise.all(input.names.map(async (name) => [name, (await journeysTriggeredBy(em, input.projectId, name)).length > 0] as const)),
      );
      const waiting = await contactsWithActiveExecutions(em, input.projectId, [...new Set(events.map((e) => e.contactId))]);
      const deps = { em, temporal: new TemporalGateway(ctx.client, ctx.info.taskQueue, config), config };
      for (const event of events) {
        if (triggers.get(event.name) || waiting.has(event.contactId)) {
          await deliverTrackedEvent(deps, {
            projectId: input.projectId,
            contactId: event.contactId,
            eventId: event.id,
            name: event.name,
            trackedAt: event.createdAt,
            context: event.data,
          });
        }
        ctx.heartbeat(event.id);
      }
      return { delivered: events.length, lastId: events[events.length - 1]!.id };
    },
  };
}

export type SegmentActivities = ReturnType<typeof createSegmentActivities>;
