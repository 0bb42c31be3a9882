import type { EntityManager } from '@mikro-orm/postgresql';
import type { AttachmentFile, StoredEmail } from '../mail/compose';
import { newId } from './ids';
import { query, queryOne } from './sql';

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

export interface ClaimedEmail {
  email: StoredEmail;
  projectId: string;
  /** The recipient is on the project's suppression list (db/suppressions.ts): never hand it to the relay. */
  suppressed: boolean;
  /** The project is disabled (db/project-security.ts): it sends nothing. */
  projectDisabled: boolean;
  dkim: { domain: string; selector: string; privateKeyPem: string } | undefined;
}

interface ClaimedRow {
  id: string;
  project_id: string;
  to_email: string;
  to_name: string | null;
  from_email: string;
  from_name: string | null;
  reply_to: string | null;
  subject: string;
  body: string;
  headers: Record<string, string>;
  files: AttachmentFile[] | null;
  suppressed: boolean;
  project_disabled: boolean;
  dkim_domain: string | null;
  dkim_selector: string | null;
  dkim_private_key: string | null;
}

/**
 * Claims up to `limit` due emails of the queue, oldest first, in one statement: each becomes
 * SENDING with its attempt counted and is leased to the engine for `leaseSeconds`. SKIP LOCKED
 * lets any number of engines (and worker processes) claim side by side without waiting on each
 * other; the lease keeps a claimed row from being claimed again until it is settled or expires.
 */
export async function claimDueEmails(em: EntityManager, queue: string, limit: number, leaseSeconds: number): Promise<ClaimedEmail[]> {
  const rows = await query<ClaimedRow>(
    em,
    `with due as (
       select id from emails
       where queue = ? and status in ('QUEUED','SENDING') and (lease_until is null or lease_until < now())
       order by created_at limit ? for update skip locked
     ), claimed as (
       update emails e set status = 'SENDING', attempts = e.attempts + 1, last_attempt_at = now(), updated_at = now(),
         lease_until = now() + make_interval(secs => ?), lease_owner = 'engine'
       from due where e.id = due.id
       returning e.*
     )
     select c.id, c.project_id, c.to_email, c.to_name, c.from_email, c.from_name, c.reply_to, c.subject, c.body, c.headers, a.files,
            exists (select 1 from suppressions s where s.project_id = c.project_id and s.email = lower(c.to_email)) as suppressed,
            p.disabled as project_disabled, d.domain as dkim_domain, d.dkim_selector, d.dkim_private_key
     from claimed c
     join projects p on p.id = c.project_id
     left join attachment_sets a on a.id = c.attachment_set_id
     left join domains d on d.id = c.domain_id
     order by c.created_at`,
    [queue, limit, leaseSeconds],
  );
  return rows.map((row) => ({
    projectId: row.project_id,
    suppressed: row.suppressed,
    projectDisabled: row.project_disabled,
    dkim:
      row.dkim_domain && row.dkim_selector && row.dkim_private_key
        ? { domain: row.dkim_domain, selector: row.dkim_selector, privateKeyPem: row.dkim_private_key }
        : undefined,
    email: {
      id: row.id,
      toEmail: row.to_email,
      toName: row.to_name,
      fromEmail: row.from_email,
      fromName: row.from_name,
      replyTo: row.reply_to,
      subject: row.subject,
      body: row.body,
      headers: row.headers,
      attachments: row.files ?? [],
    },
  }));
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

/**
 * SENT, with their `email.sent` events, for everything the relay accepted since the last write:
 * one statement however many. A repeat changes nothing (sent_at is set once); an open or a
 * delivery notification may already have moved the status on, and then keeps it.
 */
export async function markEmailsSent(em: EntityManager, marks: { emailId: string; smtpResponse: string }[]): Promise<void> {
  if (marks.length === 0) return;
  const input = marks.map((m) => ({ email_id: m.emailId, response: m.smtpResponse, event_id: newId('evt') }));
  await query(
    em,
    `with s as (
       select * from jsonb_to_recordset(?::jsonb) as x(email_id uuid, response text, event_id text)
     ), upd as (
       update emails e set status = case when e.status in ('QUEUED','SENDING') then 'SENT' else e.status end,
         smtp_response = s.response, error = null, sent_at = now(), updated_at = now(), lease_until = null, lease_owner = null
       from s where e.id = s.email_id and e.sent_at is null and e.status <> 'FAILED'
       returning e.id, e.project_id, e.contact_id, e.campaign_id
     ), ev as (
       insert into events (id, project_id, contact_id, name, data)
       select s.event_id, upd.project_id, upd.contact_id, 'email.sent',
              jsonb_build_object('emailId', upd.id) || case when upd.campaign_id is null then '{}'::jsonb else jsonb_build_object('campaignId', upd.campaign_id) end
       from upd join s on s.email_id = upd.id
     ), rec as (
       -- A campaign email deferred to the engine (db/campaign-send.ts deferCampaignEmails) settles its recipient here.
       update campaign_recipients r set status = 'SENT', email_id = upd.id
       from upd where upd.campaign_id is not null and r.campaign_id = upd.campaign_id and r.contact_id = upd.contact_id
     )
     update campaigns c set sent_count = c.sent_count + n.sent
     from (select campaign_id, count(*) as sent from upd where campaign_id is not null group by campaign_id) n
     where c.id = n.campaign_id`,
    [JSON.stringify(input)],
  );
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

/** Claims given back unsent (a round that ended with emails still waiting): due again at once. */
export async function releaseClaims(em: EntityManager, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await query(
    em,
    `update emails set lease_until = null, lease_owner = null, attempts = greatest(attempts - 1, 0)
     where id = any(?::uuid[]) and lease_owner = 'engine' and status = 'SENDING'`,
    [ids],
  );
}
