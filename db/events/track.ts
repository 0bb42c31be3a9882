import type { EntityManager } from '@mikro-orm/postgresql';
import { Coalescer } from '../coalescer';
import { normalizeEmail } from '../contacts/contacts';
import { inferFieldType, planDataPatch } from '../contacts/data';
import { newId } from '../ids';
import type { Orm } from '../orm';
import { query } from '../sql';

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
 * round trip (six with BEGIN, COMMIT and a statement per step: docs/performance.md). For use
 * inside a transaction (an Idempotency-Key's); without one, `TrackBatches` shares the statement
 * with concurrent requests.
 */
export async function trackEvent(em: EntityManager, projectId: string, queue: string, req: TrackRequest): Promise<TrackedEvent> {
  return (await trackDistinct(em, queue, [{ projectId, req }]))[0]!;
}

/**
 * Concurrent `/v1/track` requests without an Idempotency-Key, tracked in one statement per batch
 * (db/coalescer.ts): the statement's fixed cost (round trip, executor start, commit) is paid once
 * for the batch. Each request's answer is still its own: a request the statement cannot take (a
 * value PostgreSQL refuses) fails alone.
 */
export class TrackBatches {
  private readonly batches: Coalescer<TrackItem, TrackedEvent>;

  constructor(orm: Orm, queue: string) {
    // One manager for every batch: raw statements only take a pooled connection through it.
    const em = orm.em.fork();
    this.batches = new Coalescer((items) => trackEvents(em, queue, items), { maxBatch: 64, maxInFlight: 4 });
  }

  track(projectId: string, req: TrackRequest): Promise<TrackedEvent> {
    return this.batches.run({ projectId, req });
  }
}

/**
 * Tracks every item, in order: items for the same contact go in separate statements one after
 * another (a statement writes each contact once), the others together. When a statement of
 * several fails, its items go again one by one, so only the one at fault gets an error.
 */
export async function trackEvents(em: EntityManager, queue: string, items: readonly TrackItem[]): Promise<(TrackedEvent | Error)[]> {
  const results: (TrackedEvent | Error)[] = new Array(items.length);
  // Round k takes the k-th request for each contact.
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const contact = `${item.projectId}\n${normalizeEmail(item.req.email)}`;
    const round = seen.get(contact) ?? 0;
    seen.set(contact, round + 1);
    (rounds[round] ??= []).push(i);
  });
  for (const round of rounds) {
    try {
      const tracked = await trackDistinct(em, queue, round.map((i) => items[i]!));
      round.forEach((i, k) => (results[i] = tracked[k]!));
    } catch (err) {
      if (round.length === 1 || !isStatementError(err)) {
        for (const i of round) results[i] = err as Error;
        continue;
      }
      for (const i of round) {
        results[i] = await trackDistinct(em, queue, [items[i]!]).then(
          (tracked) => tracked[0]!,
          (single: unknown) => single as Error,
        );
      }
    }
  }
  return results;
}

/** An error PostgreSQL raised for the statement (SQLSTATE), as opposed to a lost connection. */
const isStatementError = (err: unknown) => {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !code.startsWith('57');
};

/**
 * One statement for items of distinct contacts:
 *  - the contacts are upserted (a new one is subscribed unless `subscribed: false` is sent), keys
 *    seen for the first time registered with their type (the first item's type wins), and the
 *    rows locked in one order (project, email), so two batches never wait on each other in a cycle;
 *  - contact.subscribed / contact.unsubscribed is recorded when an explicit value changed the state;
 *  - each event is stored with its data (one-shot `{value, persistent:false}` values only reach the
 *    trigger's context);
 *  - what it must cause later is written beside it (trigger_outbox, the transactional outbox): a
 *    row only when an enabled workflow is triggered by the name or the contact has an active
 *    execution, which is signalled. The executions the event starts never get their own trigger.
 *    The caller wakes the trigger dispatcher after the commit (db/messages/engine-wakeups.ts).
 */
async function trackDistinct(em: EntityManager, queue: string, items: readonly TrackItem[]): Promise<TrackedEvent[]> {
  const cols = {
    ord: [] as number[],
    project: [] as string[],
    email: [] as string[],
    newId: [] as string[],
    subscribedNew: [] as boolean[],
    subscribedGiven: [] as (boolean | null)[],
    set: [] as string[],
    remove: [] as string[],
    changeId: [] as string[],
    eventId: [] as string[],
    name: [] as string[],
    context: [] as string[],
  };
  const fields = { project: [] as string[], key: [] as string[], type: [] as string[] };
  items.forEach(({ projectId, req }, ord) => {
    const patch = planDataPatch(req.data);
    cols.ord.push(ord);
    cols.project.push(projectId);
    cols.email.push(normalizeEmail(req.email));
    cols.newId.push(newId('cnt'));
    cols.subscribedNew.push(req.subscribed ?? true);
    cols.subscribedGiven.push(req.subscribed ?? null);
    cols.set.push(JSON.stringify(patch.set));
    cols.remove.push(JSON.stringify(patch.remove));
    // In this order, so the subscription change sorts before the event that carried it.
    cols.changeId.push(newId('evt'));
    cols.eventId.push(newId('evt'));
    cols.name.push(req.event);
    // What a triggered workflow gets as its context: the event's data and its one-shot values.
    cols.context.push(JSON.stringify({ ...patch.set, ...patch.transient }));
    for (const [key, value] of Object.entries(patch.set)) {
      fields.project.push(projectId);
      fields.key.push(key);
      fields.type.push(inferFieldType(value));
    }
  });
  const rows = await query<{ ord: number; contact: string; event: string; created_at: Date; queued: boolean }>(
    em,
    `with r as (
       select * from unnest(?::int[], ?::text[], ?::text[], ?::text[], ?::boolean[], ?::boolean[], ?::jsonb[], ?::jsonb[], ?::text[], ?::text[], ?::text[], ?::jsonb[])
         as r(ord, project_id, email, new_id, subscribed_new, subscribed_given, set_data, remove, change_id, event_id, name, context)
     ), registered as (
       insert into contact_fields (project_id, key, type)
       select distinct on (project_id, key) project_id, key, type
       from unnest(?::text[], ?::text[], ?::text[]) with ordinality as f(project_id, key, type, n)
       order by project_id, key, n
       on conflict do nothing
     ), previous as (
       select c.project_id, c.email, c.subscribed from contacts c join r on c.project_id = r.project_id and c.email = r.email
       order by c.project_id, c.email
       for update of c
     ), up as (
       insert into contacts as c (id, project_id, email, subscribed, data)
       -- Reading "previous" here makes PostgreSQL lock and read the old rows before the write;
       -- referenced only later, it would run after it and see nothing.
       select r.new_id, r.project_id, r.email, r.subscribed_new, r.set_data from r, (select count(*) from previous) as locked
       order by r.project_id, r.email
       on conflict (project_id, email) do update set
         subscribed = coalesce((select r.subscribed_given from r where r.project_id = excluded.project_id and r.email = excluded.email), c.subscribed),
         data = (c.data || excluded.data)
           - (select array(select jsonb_array_elements_text(r.remove)) from r where r.project_id = excluded.project_id and r.email = excluded.email),
         updated_at = now()
       returning c.id, c.project_id, c.email, c.subscribed, (xmax = 0) as inserted
     ), changed as (
       insert into events (id, project_id, contact_id, name, data)
       select r.change_id, r.project_id, up.id, case when up.subscribed then 'contact.subscribed' else 'contact.unsubscribed' end, '{}'::jsonb
       from r join up on up.project_id = r.project_id and up.email = r.email
       join previous p on p.project_id = r.project_id and p.email = r.email
       where not up.inserted and p.subscribed <> up.subscribed
     ), ev as (
       insert into events (id, project_id, contact_id, name, data)
       select r.event_id, r.project_id, up.id, r.name, r.set_data
       from r join up on up.project_id = r.project_id and up.email = r.email
       returning id, project_id, contact_id, name, created_at
     ), active as (
       select ev.id as event_id, coalesce(array_agg(w.id order by w.id) filter (where w.id is not null), '{}') as ids
       from ev left join workflow_executions w
         on w.contact_id = ev.contact_id and w.project_id = ev.project_id and w.status in ('RUNNING','WAITING')
       group by ev.id
     ), queued as (
       insert into trigger_outbox (queue, project_id, contact_id, event_id, name, tracked_at, context, signal_executions)
       select ?, ev.project_id, ev.contact_id, ev.id, ev.name, ev.created_at, r.context, active.ids
       from ev join active on active.event_id = ev.id join r on r.event_id = ev.id
       where cardinality(active.ids) > 0
          or exists (select 1 from workflows w where w.project_id = ev.project_id and w.enabled and w.trigger_config->>'eventName' = ev.name)
       returning event_id
     )
     select r.ord, ev.contact_id as contact, ev.id as event, ev.created_at, exists (select 1 from queued q where q.event_id = ev.id) as queued
     from r join ev on ev.id = r.event_id`,
    [
      cols.ord, cols.project, cols.email, cols.newId, cols.subscribedNew, cols.subscribedGiven,
      cols.set, cols.remove, cols.changeId, cols.eventId, cols.name, cols.context,
      fields.project, fields.key, fields.type,
      queue,
    ],
  );
  const tracked: TrackedEvent[] = new Array(items.length);
  for (const row of rows) {
    tracked[row.ord] = { contact: row.contact, event: row.event, timestamp: new Date(row.created_at).toISOString(), queued: row.queued };
  }
  if (rows.length !== items.length) throw new Error(`trackEvents: ${rows.length} rows for ${items.length} events`);
  return tracked;
}
