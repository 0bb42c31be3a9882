import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { JsonValue } from '../entities/contact';
import { query } from '../sql';

/** A recorded event with journeys to start or executions to signal (trigger_outbox, db/record-events.ts). */
export interface TriggerRow {
  id: string;
  projectId: string;
  contactId: string;
  eventId: string;
  name: string;
  trackedAt: string;
  context: Record<string, JsonValue>;
  /** The contact's executions that waited for the event when it was recorded: they receive it. */
  signalExecutions: string[];
  /** False for an event a journey caused (db/record-events.ts, the loop rule): it starts no journey. */
  startsJourneys: boolean;
}

/**
 * Claims up to `limit` rows of the queue, oldest first, leased for `leaseSeconds`: a dispatcher
 * that dies leaves them to the next claim once the lease runs out, and its work is repeated
 * (starts are idempotent by execution id, signals harmless to repeat).
 */
export async function claimTriggers(em: EntityManager, queue: string, limit: number, leaseSeconds: number): Promise<TriggerRow[]> {
  const rows = await query<{
    id: string;
    project_id: string;
    contact_id: string;
    event_id: string;
    name: string;
    tracked_at: Date;
    context: Record<string, JsonValue>;
    signal_executions: string[];
    starts_journeys: boolean;
  }>(
    em,
    `update trigger_outbox t set lease_until = now() + make_interval(secs => ?)
     where t.id in (
       select id from trigger_outbox where queue = ? and (lease_until is null or lease_until < now())
       order by id limit ? for update skip locked)
     returning t.*`,
    [leaseSeconds, queue, limit],
  );
  return rows
    .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)))
    .map((r) => ({
      id: String(r.id),
      projectId: r.project_id,
      contactId: r.contact_id,
      eventId: r.event_id,
      name: r.name,
      trackedAt: new Date(r.tracked_at).toISOString(),
      context: r.context,
      signalExecutions: r.signal_executions,
      startsJourneys: r.starts_journeys,
    }));
}

export async function deleteTriggers(em: EntityManager, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await query(em, 'delete from trigger_outbox where id = any(?::bigint[])', [ids]);
}

/**
 * The execution an event starts of a workflow has an id derived from both, so a start repeated
 * after a crash (or a retried segment delivery) claims and starts the same one. It keeps the
 * event id's time part: execution ids sort by creation time like every other id (db/ids.ts).
 */
export function executionIdFor(eventId: string, workflowId: string): string {
  const time = eventId.slice(eventId.indexOf('_') + 1, eventId.indexOf('_') + 13);
  return `exe_${time}${createHash('sha256').update(`${eventId}:${workflowId}`).digest('hex').slice(0, 20)}`;
}
