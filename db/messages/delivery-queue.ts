import type { EntityManager } from '@mikro-orm/postgresql';
import { DELIVERY_COLUMNS, type DeliveryRow, type EmailForDelivery, toDeliverable } from './emails';
import { newId } from '../ids';
import { recordEventsCtes } from '../record-events';
import { query, queryOne, sqlInteger, sqlText } from '../sql';

/**
 * The delivery engine's queue is the `emails` table itself (docs/delivery.md): a row with a `queue`
 * and status QUEUED, or SENDING with its lease run out, is due. Writers wake the engines after
 * their commit (temporal/wakeups.ts); an engine also looks on its own about once a second.
 */

/** Emails queued before the engine existed (marked `*` by the migration) join this engine's queue. */
export async function adoptUnassignedEmails(em: EntityManager, queue: string): Promise<number> {
  const rows = await query(em, `update emails set queue = ? where queue = '*' and status in ('QUEUED','SENDING') returning 1`, [queue]);
  return rows.length;
}

/** What one claim took, and when a throttled project it had to leave waiting may send again. */
export interface Claim {
  emails: EmailForDelivery[];
  /** Milliseconds until a throttled project with queued emails has a free slot; null when none waits. */
  throttledForMs: number | null;
}

/**
 * How far ahead of a throttled project's clock a claim may take its emails: the burst a throttle
 * lets through at once, at least one email (db/messages/send-throttle.ts).
 */
const THROTTLE_AHEAD_SECONDS = 0.1;

/**
 * Claims up to `limit` due emails of the queue in one statement: each becomes SENDING with its
 * attempt counted and is leased to the engine for `leaseSeconds`. SKIP LOCKED lets any number of
 * engines (and worker processes) claim side by side without waiting on each other; the lease keeps
 * a claimed row from being claimed again until it is settled or expires.
 *
 * QUEUED emails are claimed fairly: every project with queued mail gets a turn, oldest first
 * within it, so one project's backlog delays another's email by one claim, not by the backlog.
 * A throttled project (its own rate in `send_throttles`) gets only the slots its clock has free,
 * reserved in the same statement; the rest wait in the table, not in the engine's lanes, and
 * `throttledForMs` says when to look again. `expired` picks the other kind of due email: SENDING
 * ones whose lease ran out (a dead worker's, a retry workflow that never started), oldest lease
 * first; the engine looks for those now and then, not on every claim.
 */
export async function claimDueEmails(
  em: EntityManager,
  queue: string,
  limit: number,
  leaseSeconds: number,
  which: 'queued' | 'expired' = 'queued',
): Promise<Claim> {
  const { sql, params } = claimStatement(queue, limit, leaseSeconds, which);
  const rows = await query<DeliveryRow & { throttled_for_ms: number | null }>(em, sql, params);
  const wait = rows[0]?.throttled_for_ms;
  return {
    emails: rows.filter((r) => r.id !== null).map(toDeliverable),
    throttledForMs: wait === null || wait === undefined ? null : Math.max(0, Number(wait)),
  };
}

/**
 * claimDueEmails's statement, apart so a bench can read its plan. The queued claim's values (the
 * engine's queue, batch and lease) are written into its text rather than bound: PostgreSQL plans
 * a prepared statement without parameters once per connection, and again when the tables'
 * statistics change; with them it chose to plan this one anew on every call, which took longer
 * (0.8 ms) than running it.
 */
export function claimStatement(queue: string, limit: number, leaseSeconds: number, which: 'queued' | 'expired'): { sql: string; params: unknown[] } {
  const claim = which === 'queued' ? fairClaimCtes(queue, limit) : expiredClaimCtes(queue, limit);
  return {
    sql: `with ${claim.sql}, claimed as (
       update emails e set status = 'SENDING', attempts = e.attempts + 1, last_attempt_at = now(), updated_at = now(),
         lease_until = now() + make_interval(secs => ${sqlInteger(leaseSeconds)}), lease_owner = 'engine'
       from due where e.id = due.id
       returning e.*
     )
     select ${DELIVERY_COLUMNS}, w.throttled_for_ms
     from (${claim.throttledForMs}) w
     left join (claimed e
       join projects p on p.id = e.project_id
       left join attachment_sets a on a.id = e.attachment_set_id
       left join domains d on d.id = e.domain_id) on true
     order by e.created_at`,
    params: claim.params,
  };
}

interface ClaimCtes {
  /** CTEs ending in `due (id)`: the rows to claim, locked. */
  sql: string;
  params: unknown[];
  /** A one-row select of `throttled_for_ms`. */
  throttledForMs: string;
}

/**
 * The projects with due QUEUED mail in the queue (a skip scan of emails_queued_project: one index
 * probe per project), each with its share of the claim: limit / projects, or for a throttled one
 * what its clock has free within THROTTLE_AHEAD_SECONDS. Each project's oldest emails up to its
 * share are locked, and the claim takes them turn by turn (every project's first, then every
 * second...), so a share a project leaves unused is not taken by another in this claim: the
 * next claim comes as soon as the lanes have room. What throttled projects take moves their clock
 * (from its value at the update, so two processes claiming at once both count: the rate holds
 * over time, and the burst is at most one claim's share each).
 */
function fairClaimCtes(queue: string, limit: number): ClaimCtes {
  const [q, n] = [sqlText(queue), sqlInteger(limit)];
  return {
    params: [],
    sql: `recursive waiting as (
       (select project_id from emails
        where queue = ${q} and status = 'QUEUED' and (lease_until is null or lease_until < now()) order by project_id limit 1)
       union all
       select (select e.project_id from emails e
               where e.queue = ${q} and e.status = 'QUEUED' and (e.lease_until is null or e.lease_until < now()) and e.project_id > w.project_id
               order by e.project_id limit 1)
       from waiting w where w.project_id is not null
     ), clocks as (
       -- Locked: a concurrent claim (another engine, another worker) reads a clock only once this one has moved it.
       select t.project_id, t.rate_per_second, t.next_at from send_throttles t
       where t.rate_per_second is not null and t.project_id in (select project_id from waiting where project_id is not null)
       for update
     ), lanes as (
       select w.project_id, t.rate_per_second as rate, greatest(t.next_at, clock_timestamp()) as free_at,
              ceil(${n}::float8 / count(*) over ())::int as share
       from waiting w left join clocks t on t.project_id = w.project_id
       where w.project_id is not null
     ), shares as (
       select project_id, rate, free_at,
              case when rate is null then share
                   else least(share, greatest(0, ceil((extract(epoch from clock_timestamp() - free_at) + ${THROTTLE_AHEAD_SECONDS}::float8) * rate)))::int
              end as n
       from lanes
     ), taken as (
       select e.id, e.project_id, e.created_at
       from shares s cross join lateral (
         select e.id, e.project_id, e.created_at from emails e
         where e.queue = ${q} and e.project_id = s.project_id and e.status = 'QUEUED' and (e.lease_until is null or e.lease_until < now())
         order by e.created_at limit s.n for update skip locked
       ) e
     ), due as (
       select id, project_id from (
         select id, project_id, created_at, row_number() over (partition by project_id order by created_at) as turn from taken
       ) t order by turn, created_at limit ${n}
     ), reserved as (
       update send_throttles t set next_at = greatest(t.next_at, clock_timestamp()) + make_interval(secs => c.n / s.rate)
       from (select project_id, count(*)::float8 as n from due group by project_id) c join shares s using (project_id)
       where t.project_id = c.project_id and s.rate is not null
       returning t.project_id, t.next_at
     )`,
    throttledForMs: `select (extract(epoch from min(coalesce(r.next_at, s.free_at)) - clock_timestamp()) - ${THROTTLE_AHEAD_SECONDS}) * 1000
       as throttled_for_ms
     from shares s left join reserved r using (project_id) where s.rate is not null`,
  };
}

function expiredClaimCtes(queue: string, limit: number): ClaimCtes {
  return {
    sql: `due as (
       select id from emails where queue = ${sqlText(queue)} and status = 'SENDING' and lease_until < now()
       order by lease_until limit ? for update skip locked
     )`,
    // Bound: the limit is what the queued claim left over, a different number each time, and this claim is rare.
    params: [limit],
    throttledForMs: 'select null::float8 as throttled_for_ms',
  };
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
     ), sent as (
       select s.event_id as id, upd.project_id, upd.contact_id, 'email.sent' as name,
              jsonb_build_object('emailId', upd.id) || case when upd.campaign_id is null then '{}'::jsonb else jsonb_build_object('campaignId', upd.campaign_id) end as data,
              null::jsonb as context, false as by_journey
       from upd join s on s.email_id = upd.id
     ), ${recordEventsCtes('sent')}, rec as (
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
export async function leaseForRetry(
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
