import type { EntityManager } from '@mikro-orm/postgresql';
import { DELIVERY_COLUMNS, type DeliveryRow, type EmailForDelivery, toDeliverable } from './emails';
import { newId } from '../ids';
import { query, queryOne } from '../sql';

/**
 * The delivery engine's queue is the `emails` table itself (docs/design.md, "One delivery
 * engine"): a row with a `queue` and status QUEUED or SENDING whose lease is free is due. Writers
 * call notifyQueued in their own transaction; PostgreSQL delivers the notification at commit, so
 * an engine wakes for rows it can already see.
 */
export const OUTBOX_CHANNEL = 'tidings_outbox';

/** Wakes the engines of `queue` once the caller's transaction commits. */
export async function notifyQueued(em: EntityManager, queue: string): Promise<void> {
  await query(em, 'select pg_notify(?, ?)', [OUTBOX_CHANNEL, `emails:${queue}`]);
}

/** Emails queued before the engine existed (marked `*` by the migration) join this engine's queue. */
export async function adoptUnassignedEmails(em: EntityManager, queue: string): Promise<number> {
  const rows = await query(em, `update emails set queue = ? where queue = '*' and status in ('QUEUED','SENDING') returning 1`, [queue]);
  return rows.length;
}

/**
 * Claims up to `limit` due emails of the queue in one statement: each becomes SENDING with its
 * attempt counted and is leased to the engine for `leaseSeconds`. `expired` picks the other kind
 * of due email: SENDING ones whose lease ran out (a dead worker's, a retry workflow that never
 * started); the engine looks for those now and then, not on every claim. SKIP LOCKED lets any
 * number of engines (and worker processes) claim side by side without waiting on each other; the
 * lease keeps a claimed row from being claimed again until it is settled or expires.
 */
export async function claimDueEmails(
  em: EntityManager,
  queue: string,
  limit: number,
  leaseSeconds: number,
  which: 'queued' | 'expired' = 'queued',
): Promise<EmailForDelivery[]> {
  const due =
    which === 'queued'
      ? `select id from emails where queue = ? and status = 'QUEUED' and (lease_until is null or lease_until < now())
         order by created_at limit ? for update skip locked`
      : `select id from emails where queue = ? and status = 'SENDING' and lease_until < now()
         order by lease_until limit ? for update skip locked`;
  const rows = await query<DeliveryRow>(
    em,
    `with due as (${due}), claimed as (
       update emails e set status = 'SENDING', attempts = e.attempts + 1, last_attempt_at = now(), updated_at = now(),
         lease_until = now() + make_interval(secs => ?), lease_owner = 'engine'
       from due where e.id = due.id
       returning e.*
     )
     select ${DELIVERY_COLUMNS}
     from claimed e
     join projects p on p.id = e.project_id
     left join attachment_sets a on a.id = e.attachment_set_id
     left join domains d on d.id = e.domain_id
     order by e.created_at`,
    [queue, limit, leaseSeconds],
  );
  return rows.map(toDeliverable);
}

/** Keeps the engine's claim on emails still in flight (a slow relay must not let another engine send them too). */
export async function renewLeases(em: EntityManager, ids: string[], leaseSeconds: number): Promise<void> {
  if (ids.length === 0) return;
  await query(
    em,
    `update emails set lease_until = now() + make_interval(secs => ?) where id = any(?::uuid[]) and lease_owner = 'engine' and status = 'SENDING'`,
    [leaseSeconds, ids],
  );
}

/** The relay accepted the email, and answered this. */
export interface SentMark {
  emailId: string;
  smtpResponse: string;
}

/**
 * SENT, with their `email.sent` events, for everything the relay accepted since the last write:
 * one statement however many. A repeat changes nothing (sent_at is set once); an open or a
 * delivery notification may already have moved the status on, and then keeps it. Arrays, not a
 * JSON document, for the row estimate (see markCampaignEmailsSent).
 */
export async function markEmailsSent(em: EntityManager, marks: SentMark[]): Promise<void> {
  if (marks.length === 0) return;
  const { sql, params } = sentMarkStatement(marks);
  await query(em, sql, params);
}

/** markEmailsSent's statement, apart so a test can read its plan. */
export function sentMarkStatement(marks: SentMark[]): { sql: string; params: unknown[] } {
  const ids = marks.map((m) => m.emailId);
  return {
    sql: `with s as (
       select * from unnest(?::uuid[], ?::text[], ?::text[]) as x(email_id, response, event_id)
     ), upd as (
       update emails e set status = case when e.status in ('QUEUED','SENDING') then 'SENT' else e.status end,
         smtp_response = s.response, error = null, sent_at = now(), updated_at = now(), lease_until = null, lease_owner = null
       -- e.id = any(...) as well: the planner then takes the primary key even while the table is small
       -- or has grown since its last ANALYZE (it guesses 10 rows for s, and 1 for sent_at is null).
       from s where e.id = s.email_id and e.id = any(?::uuid[]) and e.sent_at is null and e.status <> 'FAILED'
       returning e.id, e.project_id, e.contact_id, e.campaign_id
     ), ev as (
       insert into events (id, project_id, contact_id, name, data)
       select s.event_id, upd.project_id, upd.contact_id, 'email.sent',
              jsonb_build_object('emailId', upd.id) || case when upd.campaign_id is null then '{}'::jsonb else jsonb_build_object('campaignId', upd.campaign_id) end
       from upd join s on s.email_id = upd.id
     ), rec as (
       -- A campaign email deferred to the engine (db/campaigns/send.ts deferCampaignEmails) settles its recipient here.
       update campaign_recipients r set status = 'SENT', email_id = upd.id
       from upd where upd.campaign_id is not null and r.campaign_id = upd.campaign_id and r.contact_id = upd.contact_id
     )
     update campaigns c set sent_count = c.sent_count + n.sent
     from (select campaign_id, count(*) as sent from upd where campaign_id is not null group by campaign_id) n
     where c.id = n.campaign_id`,
    params: [ids, marks.map((m) => m.smtpResponse), marks.map(() => newId('evt')), ids],
  };
}

/**
 * A transient failure (a 4xx reply, the relay unreachable) takes the email off the fast path: it
 * is leased to its own retry workflow (workflowIds.sendEmails) for `leaseSeconds`, the longest
 * that workflow may wait between attempts plus a margin, and says why it is not out yet. Should
 * that workflow never start, the lease runs out and an engine claims the email again.
 */
export async function handOffForRetry(
  em: EntityManager,
  emailId: string,
  error: string,
  relayResponse: string | null,
  leaseSeconds: number,
): Promise<void> {
  await query(
    em,
    `update emails set error = ?, smtp_response = coalesce(?, smtp_response), updated_at = now(),
       lease_until = now() + make_interval(secs => ?), lease_owner = 'workflow'
     where id = ? and status in ('QUEUED','SENDING')`,
    [error, relayResponse, leaseSeconds, emailId],
  );
}

/**
 * A delivery attempt by a workflow (the per-email retry workflow, or a sendEmails / journey
 * execution from before the engine): it may take the email when nobody holds it or when the email
 * is already leased to a workflow. The lease it takes outlasts the attempt and the wait before the
 * next one, so an engine leaves the email to it. Returns false when an engine holds it (sending it
 * right now): the caller tries again later and finds it settled.
 */
export async function claimForWorkflow(em: EntityManager, emailId: string, leaseSeconds: number): Promise<boolean> {
  const row = await queryOne(
    em,
    `update emails set status = 'SENDING', attempts = attempts + 1, last_attempt_at = now(), updated_at = now(),
       lease_until = now() + make_interval(secs => ?), lease_owner = 'workflow'
     where id = ? and status in ('QUEUED','SENDING') and (lease_until is null or lease_until < now() or lease_owner = 'workflow')
     returning 1 as ok`,
    [leaseSeconds, emailId],
  );
  return !!row;
}

/**
 * Claims given back unsent: QUEUED again, due at once, and the attempt the claim counted is taken
 * back. Used for what a round claimed but did not start, and (with `error`, the reason) for what it
 * held when the relay could not be reached at all: an outage of the relay is nobody's own failure,
 * so those emails wait as QUEUED, saying why, until the engine's probe finds the relay back.
 */
export async function releaseClaims(em: EntityManager, ids: string[], error?: string): Promise<void> {
  if (ids.length === 0) return;
  await query(
    em,
    `update emails set status = 'QUEUED', lease_until = null, lease_owner = null, attempts = greatest(attempts - 1, 0),
       error = coalesce(?, error), smtp_response = coalesce(?, smtp_response), updated_at = now()
     where id = any(?::uuid[]) and lease_owner = 'engine' and status = 'SENDING'`,
    [error ?? null, error ?? null, ids],
  );
}
