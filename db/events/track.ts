import type { EntityManager } from '@mikro-orm/postgresql';
import { Coalescer } from '../coalescer';
import { contactUpsertCtes } from '../contacts/contacts';
import { inContactRounds } from '../contacts/rounds';
import { newId } from '../ids';
import type { Orm } from '../orm';
import { query } from '../sql';
import { recordEventsCtes } from '../record-events';

export interface TrackRequest {
  email: string;
  event: string;
  data?: Record<string, unknown>;
  subscribed?: boolean;
}

export interface TrackedEvent {
  contact: string;
  event: string;
  timestamp: string;
  /** A trigger_outbox row was written: the dispatcher has journeys to start or executions to signal. */
  queued: boolean;
}

export interface TrackItem {
  projectId: string;
  req: TrackRequest;
}

/**
 * A tracked event in one statement, so it is atomic without a transaction of its own and costs one
 * round trip. For use inside a transaction (an Idempotency-Key's); without one, `TrackBatches`
 * shares the statement with concurrent requests.
 */
export async function trackEvent(em: EntityManager, projectId: string, req: TrackRequest): Promise<TrackedEvent> {
  return (await trackDistinct(em, [{ projectId, req }]))[0]!;
}

/**
 * Concurrent `/v1/track` requests without an Idempotency-Key, tracked in one statement per batch
 * (db/coalescer.ts): the statement's fixed cost (round trip, executor start, commit) is paid once
 * for the batch. Each request's answer is still its own: a request the statement cannot take (a
 * value PostgreSQL refuses) fails alone.
 */
export class TrackBatches {
  private readonly batches: Coalescer<TrackItem, TrackedEvent>;

  constructor(orm: Orm) {
    // One manager for every batch: raw statements only take a pooled connection through it.
    const em = orm.em.fork();
    this.batches = new Coalescer((items) => trackEvents(em, items));
  }

  track(projectId: string, req: TrackRequest): Promise<TrackedEvent> {
    return this.batches.run({ projectId, req });
  }
}

/** Tracks every item, in order, a contact's items in statements one after another (db/contacts/rounds.ts). */
export function trackEvents(em: EntityManager, items: readonly TrackItem[]): Promise<(TrackedEvent | Error)[]> {
  return inContactRounds(items, (item) => ({ projectId: item.projectId, email: item.req.email }), (round) => trackDistinct(em, round));
}

/**
 * One statement for items of distinct contacts:
 *  - the contacts are upserted (db/contacts/contacts.ts contactUpsertCtes: a new one is subscribed
 *    unless `subscribed: false` is sent), and a subscription change an explicit value made is
 *    recorded before the event that carried it;
 *  - each event is recorded with its data through the one event path (db/record-events.ts), which
 *    writes the journey triggers beside it; one-shot `{value, persistent:false}` values only reach
 *    the context of the journeys it starts. The caller wakes the trigger dispatcher after the
 *    commit (db/messages/engine-wakeups.ts).
 */
async function trackDistinct(em: EntityManager, items: readonly TrackItem[]): Promise<TrackedEvent[]> {
  const contacts = contactUpsertCtes(
    items.map(({ projectId, req }) => ({ projectId, email: req.email, data: req.data, subscribed: req.subscribed, subscribedWhenNew: true })),
    { recordChanges: true },
  );
  const events = { ord: [] as number[], id: [] as string[], name: [] as string[], context: [] as string[] };
  items.forEach(({ req }, ord) => {
    const { patch } = contacts.planned[ord]!;
    events.ord.push(ord);
    events.id.push(newId('evt'));
    events.name.push(req.event);
    // What a triggered workflow gets as its context: the event's data and its one-shot values.
    events.context.push(JSON.stringify({ ...patch.set, ...patch.transient }));
  });
  const rows = await query<{ ord: number; contact: string; event: string; created_at: Date; queued: boolean }>(
    em,
    `${contacts.sql}, e as (
       select * from unnest(?::int[], ?::text[], ?::text[], ?::jsonb[]) as e(ord, event_id, name, context)
     ), s as (
       select id, project_id, contact_id, name, data, context, by_journey from changes
       union all
       select e.event_id, r.project_id, up.id, e.name, r.set_data, e.context, false
       from e join r on r.ord = e.ord join up on up.project_id = r.project_id and up.email = r.email
     ), ${recordEventsCtes('s')}
     select e.ord, ev.contact_id as contact, ev.id as event, ev.created_at,
       exists (select 1 from recorded_triggers q join recorded x on x.id = q.event_id where x.contact_id = ev.contact_id) as queued
     from e join recorded ev on ev.id = e.event_id`,
    [...contacts.params, events.ord, events.id, events.name, events.context],
  );
  const tracked: TrackedEvent[] = new Array(items.length);
  for (const row of rows) {
    tracked[row.ord] = { contact: row.contact, event: row.event, timestamp: new Date(row.created_at).toISOString(), queued: row.queued };
  }
  if (rows.length !== items.length) throw new Error(`trackEvents: ${rows.length} rows for ${items.length} events`);
  return tracked;
}
