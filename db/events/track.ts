import type { EntityManager } from '@mikro-orm/postgresql';
import { upsertContactCtes } from '../contacts/contacts';
import { newId } from '../ids';
import { subscriptionChangeCte } from './events';
import { queryOne } from '../sql';

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

/**
 * A tracked event in one statement, so it is atomic without a transaction of its own and costs one
 * round trip (six with BEGIN, COMMIT and a statement per step: docs/performance.md):
 *  - the contact is upserted (a new one is subscribed unless `subscribed: false` is sent);
 *  - contact.subscribed / contact.unsubscribed is recorded when an explicit value changed the state;
 *  - the event is stored with its data (one-shot `{value, persistent:false}` values only reach the
 *    returned context);
 *  - what it must cause later is written beside it (trigger_outbox, the transactional outbox): a
 *    row only when an enabled workflow is triggered by the name or the contact has an active
 *    execution, which is signalled. The executions the event starts never get their own trigger.
 *    The caller wakes the trigger dispatcher after the commit (db/messages/engine-wakeups.ts).
 */
export async function trackEvent(em: EntityManager, projectId: string, queue: string, req: TrackRequest): Promise<TrackedEvent> {
  const up = upsertContactCtes(projectId, { email: req.email, subscribed: req.subscribed, data: req.data }, { subscribedWhenNew: true });
  const stored = up.patch.set;
  // What a triggered workflow gets as its context: the event's data and its one-shot values.
  const context = { ...stored, ...up.patch.transient };
  // In this order, so the subscription change sorts before the event that carried it.
  const changed = subscriptionChangeCte(projectId);
  const eventId = newId('evt');
  const row = await queryOne<{ contact: string; event: string; created_at: Date; queued: boolean }>(
    em,
    `${up.sql}${changed.sql}, ev as (
       insert into events (id, project_id, contact_id, name, data)
       select ?, ?, up.id, ?, ?::jsonb from up
       returning id, contact_id, created_at
     ), active as (
       select coalesce(array_agg(w.id order by w.id), '{}') as ids from workflow_executions w
       where w.contact_id = (select id from up) and w.project_id = ? and w.status in ('RUNNING','WAITING')
     ), queued as (
       insert into trigger_outbox (queue, project_id, contact_id, event_id, name, tracked_at, context, signal_executions)
       select ?, ?, ev.contact_id, ev.id, ?, ev.created_at, ?::jsonb, active.ids from ev, active
       where cardinality(active.ids) > 0
          or exists (select 1 from workflows w where w.project_id = ? and w.enabled and w.trigger_config->>'eventName' = ?)
       returning 1
     )
     select ev.contact_id as contact, ev.id as event, ev.created_at, exists (select 1 from queued) as queued from ev`,
    [
      ...up.params,
      ...changed.params,
      eventId, projectId, req.event, JSON.stringify(stored),
      projectId,
      queue, projectId, req.event, JSON.stringify(context),
      projectId, req.event,
    ],
  );
  return { contact: row!.contact, event: row!.event, timestamp: new Date(row!.created_at).toISOString(), queued: row!.queued };
}
