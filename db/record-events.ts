import type { EntityManager } from '@mikro-orm/postgresql';
import type { JsonValue } from './entities/contact';
import { newId } from './ids';
import { query } from './sql';

/**
 * The one way the service records an event, whoever records it: a tracked event, a send, an open,
 * a bounce, a reply, a subscription change, a segment entry. In the statement that stores the
 * events it also writes their trigger_outbox rows, so each can start journeys and wake waits with
 * the crash safety of the statement itself (nothing is lost between the event and its effects).
 *
 * A statement names a CTE of the events to record (`source`), with the columns
 *   id text, project_id text, contact_id text, name text, data jsonb,
 *   context jsonb (what a journey it starts gets; null: the data), by_journey boolean
 * and adds recordEventsCtes(source). An event gets an outbox row when a journey listens:
 *  - an execution of the contact waits for that name (workflow_executions.waiting_for_event is
 *    written before the wait begins, and a wait only takes events from after it began, so reading
 *    it here misses nothing a wait could take), or it is an outcome of an email the execution sent
 *    and one of its steps waits for that outcome (`email_waits`: such a wait takes it whenever it came);
 *  - or an enabled workflow is triggered by it, unless a journey caused it (startsJourneys).
 * The outbox rows are written in event-id order, which the dispatcher keeps per contact.
 */
export function recordEventsCtes(source: string, prefix = 'recorded'): string {
  return `${prefix} as (
       insert into events (id, project_id, contact_id, name, data)
       select id, project_id, contact_id, name, data from ${source} order by id
       returning id, project_id, contact_id, name, created_at
     ), ${prefix}_triggers as (
       insert into trigger_outbox (project_id, contact_id, event_id, name, tracked_at, context, signal_executions, starts_journeys)
       select ev.project_id, ev.contact_id, ev.id, ev.name, ev.created_at, coalesce(s.context, s.data), waiting.ids, ${startsJourneys('s')}
       from ${prefix} ev join ${source} s on s.id = ev.id
       cross join lateral (
         select coalesce(array_agg(x.id order by x.id), '{}') as ids from workflow_executions x
         where x.contact_id = ev.contact_id and x.status in ('RUNNING','WAITING')
           and (x.waiting_for_event = ev.name or (ev.name = any(x.email_waits) and x.id = ${sendingExecution('s')}))
       ) waiting
       where ev.contact_id is not null and (cardinality(waiting.ids) > 0
          or (exists (select 1 from workflows w where w.project_id = ev.project_id and w.enabled and w.trigger_config->>'eventName' = ev.name)
              and ${startsJourneys('s')}))
       order by ev.id
       returning event_id
     )`;
}

/** The events about an email we sent: those of a journey's own email start no journey (the loop rule). */
const EMAIL_OUTCOMES = ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained'];

/**
 * The loop rule (docs/journeys.md): an event a journey caused — an outcome of an email a journey
 * sent, or a change its UPDATE_CONTACT step made — wakes the executions waiting for it but starts
 * no journey, so no journey, and no ring of journeys, can feed itself.
 */
function startsJourneys(s: string): string {
  return `not ${s}.by_journey and not (${s}.name in (${EMAIL_OUTCOMES.map((n) => `'${n}'`).join(', ')})
    and exists (select 1 from emails m where m.id = (${s}.data->>'emailId')::uuid and m.source = 'workflow'))`;
}

/** The journey execution that sent the email an event is about (emails.source_key `journey:<execution>:<seq>`). */
function sendingExecution(s: string): string {
  return `(select split_part(m.source_key, ':', 2) from emails m where m.id = (${s}.data->>'emailId')::uuid and m.source = 'workflow')`;
}

/** Events about one email we sent (data.emailId); a journey's wait for one waits for its own email. */
export const isEmailOutcome = (name: string) => EMAIL_OUTCOMES.includes(name);

export const subscriptionEventName = (subscribed: boolean) => (subscribed ? 'contact.subscribed' : 'contact.unsubscribed');

export interface NewEvent {
  projectId: string;
  /** Null for an event on nobody (its contact was deleted): stored, and it triggers nothing. */
  contactId: string | null;
  name: string;
  data?: Record<string, JsonValue>;
  /** A journey's step caused it (UPDATE_CONTACT): it wakes waits and starts no journey. */
  byJourney?: boolean;
}

export interface RecordedEvent {
  id: string;
  createdAt: string;
  /** An outbox row was written: the trigger dispatcher has work (the caller may wake it). */
  queued: boolean;
}

/** Records events given one by one (recordEventsCtes over their values), in one statement. */
export async function recordEvents(em: EntityManager, events: readonly NewEvent[]): Promise<RecordedEvent[]> {
  if (events.length === 0) return [];
  const ids = events.map(() => newId('evt'));
  const rows = await query<{ id: string; created_at: Date; queued: boolean }>(
    em,
    `with s as (
       select id, project_id, contact_id, name, data, null::jsonb as context, by_journey
       from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::jsonb[], ?::boolean[]) as s(id, project_id, contact_id, name, data, by_journey)
     ), ${recordEventsCtes('s')}
     select r.id, r.created_at, exists (select 1 from recorded_triggers t where t.event_id = r.id) as queued from recorded r`,
    [
      ids,
      events.map((e) => e.projectId),
      events.map((e) => e.contactId),
      events.map((e) => e.name),
      events.map((e) => JSON.stringify(e.data ?? {})),
      events.map((e) => e.byJourney ?? false),
    ],
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => {
    const row = byId.get(id)!;
    return { id, createdAt: new Date(row.created_at).toISOString(), queued: row.queued };
  });
}
