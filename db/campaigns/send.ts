import type { EntityManager } from '@mikro-orm/postgresql';
import { recordRelayBounces, type RelayRefusal } from '../messages/engagement';
import { audienceSql, type CampaignRow, type CampaignStatus, type CampaignType } from './campaigns';
import type { ContactDto } from '../contacts/contacts';
import type { MarketingContext } from '../messages/content';
import type { JsonValue } from '../entities/contact';
import { newId } from '../ids';
import { query, queryOne, transaction } from '../sql';
import { recordEventsCtes } from '../record-events';

/**
 * A campaign's send as the campaign workflow's activities see it: the audience snapshot when it is
 * due, recipient batches, the email rows of a batch, their outcomes, and the end of the send. The
 * API side (drafts, scheduling, cancel, stats) is db/campaigns/campaigns.ts.
 */
export type BeginOutcome =
  | { state: 'SENDING'; totalRecipients: number }
  | { state: 'NOT_YET'; scheduledFor: string }
  | { state: 'DRAFT' | 'SENT' | 'CANCELLED' | 'GONE' };

/**
 * When the campaign is due: SCHEDULED → SENDING, and the audience snapshot, once (a repeat finds
 * `snapshot_at` set and only reports). The row lock also waits for the API transaction that
 * started the workflow. A campaign moved to a later time answers NOT_YET; one still DRAFT (the
 * API's transaction rolled back) or already ended answers its state.
 */
export async function beginCampaignSend(em: EntityManager, campaignId: string): Promise<BeginOutcome> {
  let snapshot = 0;
  const outcome = await transaction(em, async (tx): Promise<BeginOutcome> => {
    const c = await queryOne<{
      project_id: string;
      status: CampaignStatus;
      segment_id: string | null;
      type: CampaignType;
      snapshot_at: Date | null;
      total_recipients: number;
      scheduled_for: Date | null;
      not_yet: boolean;
    }>(
      tx,
      `select project_id, status, segment_id, type, snapshot_at, total_recipients, scheduled_for,
         coalesce(scheduled_for > now() + interval '2 seconds', false) as not_yet
       from campaigns where id = ? for update`,
      [campaignId],
    );
    if (!c) return { state: 'GONE' };
    if (c.status === 'SCHEDULED' && c.not_yet) return { state: 'NOT_YET', scheduledFor: new Date(c.scheduled_for!).toISOString() };
    if (c.status !== 'SCHEDULED' && c.status !== 'SENDING') return { state: c.status };
    let total = c.total_recipients;
    if (!c.snapshot_at) {
      const audience = await audienceSql(tx, c.project_id, { segmentId: c.segment_id, type: c.type });
      const inserted = await queryOne<{ n: string }>(
        tx,
        `with ins as (
           insert into campaign_recipients (campaign_id, contact_id)
           select ?, a.id from (${audience.sql}) a
           on conflict do nothing returning 1)
         select count(*) as n from ins`,
        [campaignId, ...audience.params],
      );
      total = Number(inserted!.n);
      snapshot = total;
    }
    await query(
      tx,
      `update campaigns set status = 'SENDING', snapshot_at = coalesce(snapshot_at, now()), total_recipients = ?, updated_at = now()
       where id = ?`,
      [total, campaignId],
    );
    return { state: 'SENDING', totalRecipients: total };
  });
  // The batches page through these rows by key. Until the statistics know them, the planner
  // guessed a few dozen and sorted every recipient after the cursor for each page (20 ms a page
  // at 20,000) until autovacuum came by, a minute or more later.
  if (snapshot >= ANALYZE_AFTER_SNAPSHOT) await query(em, 'analyze campaign_recipients');
  return outcome;
}

/** Recipients from which a snapshot is worth a fresh look at the statistics (a sample of 30,000 rows: 0.1 s with 1,000,000 in the table). */
const ANALYZE_AFTER_SNAPSHOT = 1000;

export interface SendingCampaign {
  projectId: string;
  status: CampaignStatus;
  subject: string;
  body: string;
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  /** With the project's name for the footer (db/messages/content.ts), read with the campaign: once a batch. */
  marketing: MarketingContext | false;
}

export async function loadSendingCampaign(em: EntityManager, campaignId: string): Promise<SendingCampaign | undefined> {
  const row = await queryOne<
    Pick<CampaignRow, 'project_id' | 'status' | 'subject' | 'body' | 'from_email' | 'from_name' | 'reply_to' | 'type'> & { project_name: string }
  >(
    em,
    `select c.project_id, c.status, c.subject, c.body, c.from_email, c.from_name, c.reply_to, c.type, p.name as project_name
     from campaigns c join projects p on p.id = c.project_id where c.id = ?`,
    [campaignId],
  );
  return (
    row && {
      projectId: row.project_id,
      status: row.status,
      subject: row.subject,
      body: row.body,
      fromEmail: row.from_email,
      fromName: row.from_name,
      replyTo: row.reply_to,
      marketing: row.type === 'MARKETING' && { projectName: row.project_name },
    }
  );
}

export type RecipientStatus = 'PENDING' | 'SENT' | 'SKIPPED' | 'FAILED';

export interface Recipient {
  contact: ContactDto;
  status: RecipientStatus;
}

/**
 * loadRecipientBatch's statement, exported for its plan's test. The page is cut before the join:
 * joined first, every recipient after the cursor was looked up in contacts before the sort and
 * the limit (50 ms a page at 20,000, while the statistics did not know the snapshot's rows yet).
 */
export const RECIPIENT_PAGE = `select r.contact_id, r.status, c.email, c.subscribed, c.data, c.created_at, c.updated_at
     from (select contact_id, status from campaign_recipients where campaign_id = ? and contact_id > ? order by contact_id limit ?) r
     join contacts c on c.id = r.contact_id
     order by r.contact_id`;

/** The next `limit` recipients after `after` (keyset on contact_id), with their contact as it is now. */
export async function loadRecipientBatch(em: EntityManager, campaignId: string, after: string | null, limit: number): Promise<Recipient[]> {
  const rows = await query<{
    contact_id: string;
    status: RecipientStatus;
    email: string;
    subscribed: boolean;
    data: Record<string, JsonValue>;
    created_at: Date;
    updated_at: Date;
  }>(
    em,
    RECIPIENT_PAGE,
    [campaignId, after ?? '', limit],
  );
  return rows.map((r) => ({
    status: r.status,
    contact: {
      id: r.contact_id,
      email: r.email,
      subscribed: r.subscribed,
      data: r.data,
      createdAt: new Date(r.created_at).toISOString(),
      updatedAt: new Date(r.updated_at).toISOString(),
    },
  }));
}

/** Email rows of a campaign are keyed by (campaign, contact): a retried batch finds them again. */
export const campaignSourceKey = (campaignId: string, contactId: string) => `campaign:${campaignId}:${contactId}`;

export interface SentMark {
  emailId: string;
  contactId: string;
  smtpResponse: string;
}

/**
 * Marks emails SENT (with their `email.sent` events), their recipients SENT and the campaign's
 * counter, in one statement: either all of it happens or none. As markEmailSent: a repeat changes
 * nothing, and an email an open or a delivery notification already moved on keeps that status.
 * Campaign emails are not marked SENDING, so their attempts are counted as each outcome is written.
 * The marks travel as arrays: PostgreSQL counts an `unnest` of them as 10 rows and joins on the
 * primary keys, where it counted a `jsonb_to_recordset` as 100 and hashed every recipient of the
 * campaign for each mark (8 ms a statement at 20,000 recipients).
 */
export async function markCampaignEmailsSent(em: EntityManager, projectId: string, campaignId: string, marks: SentMark[]): Promise<void> {
  if (marks.length === 0) return;
  const ids = marks.map((m) => m.emailId);
  await query(
    em,
    `with s as (
       select * from unnest(?::uuid[], ?::text[], ?::text[], ?::text[]) as x(email_id, contact_id, response, event_id)
     ), upd as (
       update emails e set status = case when e.status in ('QUEUED','SENDING') then 'SENT' else e.status end,
         smtp_response = s.response, error = null, sent_at = now(), updated_at = now(),
         attempts = e.attempts + 1, last_attempt_at = now()
       -- e.id = any(...) as well: else, on statistics older than the campaign's rows, the planner
       -- read every unsent email through emails_to_email (sent_at second) and hashed them (5 ms at 20,000).
       from s where e.id = s.email_id and e.id = any(?::uuid[]) and e.sent_at is null and e.status <> 'FAILED'
       returning e.id, e.contact_id
     ), sent as (
       select s.event_id as id, ?::text as project_id, upd.contact_id, 'email.sent' as name,
         jsonb_build_object('emailId', upd.id, 'campaignId', ?::text) as data, null::jsonb as context, false as by_journey
       from upd join s on s.email_id = upd.id
     ), ${recordEventsCtes('sent')}, rec as (
       update campaign_recipients r set status = 'SENT', email_id = s.email_id
       from s where r.campaign_id = ? and r.contact_id = s.contact_id
     )
     update campaigns set sent_count = sent_count + (select count(*) from upd) where id = ?`,
    [ids, marks.map((m) => m.contactId), marks.map((m) => m.smtpResponse), marks.map(() => newId('evt')), ids, projectId, campaignId, campaignId, campaignId],
  );
}

/**
 * The relay refused these recipients for good (hard bounces): each attempt counted, then recorded
 * as every sender records one (recordRelayBounces: BOUNCED with the reply, `email.bounced`, the
 * address suppressed, the recipient FAILED).
 */
export async function markCampaignEmailsBounced(em: EntityManager, bounces: RelayRefusal[]): Promise<void> {
  if (bounces.length === 0) return;
  await transaction(em, async (tx) => {
    await query(
      tx,
      `update emails set attempts = attempts + 1, last_attempt_at = now(), updated_at = now()
       where id = any(?::uuid[]) and status in ('QUEUED','SENDING')`,
      [bounces.map((b) => b.emailId)],
    );
    await recordRelayBounces(tx, bounces);
  });
}

/** A relay's permanent refusal (5xx) that is no bounce: the email FAILED, its recipient FAILED; not tried again. */
export async function markCampaignEmailsFailed(
  em: EntityManager,
  campaignId: string,
  failures: { emailId: string; contactId: string; error: string }[],
): Promise<void> {
  if (failures.length === 0) return;
  await query(
    em,
    `with f as (
       select * from unnest(?::uuid[], ?::text[], ?::text[]) as x(email_id, contact_id, error)
     ), upd as (
       update emails e set status = 'FAILED', error = f.error, smtp_response = f.error, updated_at = now(),
         attempts = e.attempts + 1, last_attempt_at = now()
       from f where e.id = f.email_id and e.status in ('QUEUED','SENDING')
     )
     update campaign_recipients r set status = 'FAILED', email_id = f.email_id
     from f where r.campaign_id = ? and r.contact_id = f.contact_id`,
    [failures.map((f) => f.emailId), failures.map((f) => f.contactId), failures.map((f) => f.error.slice(0, 1000)), campaignId],
  );
}

/**
 * Campaign emails the relay refused for now (a 4xx reply): given to the delivery engine of `queue`
 * (db/messages/delivery-queue.ts), leased for a few seconds so it takes them as it takes expired
 * leases, and saying why meanwhile. The engine's SENT mark settles the recipient and counts the
 * send as the batch's would have.
 */
export async function deferCampaignEmails(em: EntityManager, queue: string, deferred: { emailId: string; error: string }[]): Promise<void> {
  if (deferred.length === 0) return;
  await query(
    em,
    `update emails e set error = f.error, smtp_response = f.error, attempts = e.attempts + 1, last_attempt_at = now(), updated_at = now(),
       queue = ?, lease_until = now() + interval '5 seconds', lease_owner = 'engine'
     from unnest(?::uuid[], ?::text[]) as f(email_id, error)
     where e.id = f.email_id and e.status in ('QUEUED','SENDING')`,
    [queue, deferred.map((f) => f.emailId), deferred.map((f) => f.error.slice(0, 1000))],
  );
}

/**
 * Recipients not to send to (unsubscribed since the snapshot, suppressed), or whose email an
 * earlier attempt settled. A skipped recipient's email row, if an earlier attempt wrote one that
 * never went, is removed.
 */
export async function settleRecipients(
  em: EntityManager,
  projectId: string,
  campaignId: string,
  settled: { contactId: string; status: Exclude<RecipientStatus, 'PENDING'>; emailId: string | null }[],
): Promise<void> {
  if (settled.length === 0) return;
  await query(
    em,
    `with x as (
       select * from unnest(?::text[], ?::text[], ?::uuid[]) as x(contact_id, status, email_id)
     ), unsent as (
       delete from emails e using x
       where x.status = 'SKIPPED' and e.project_id = ? and e.source_key = 'campaign:' || ?::text || ':' || x.contact_id
         and e.status = 'QUEUED'
     )
     update campaign_recipients r set status = x.status, email_id = coalesce(x.email_id, r.email_id)
     from x where r.campaign_id = ? and r.contact_id = x.contact_id`,
    [settled.map((s) => s.contactId), settled.map((s) => s.status), settled.map((s) => s.emailId), projectId, campaignId, campaignId],
  );
}

/**
 * The end of a send: SENDING → SENT, or SCHEDULED / SENDING → CANCELLED (also when the API
 * cancelled first: then nothing changes). A cancelled campaign's emails that never went (rows
 * written for a batch that stopped) are removed. Returns the final status.
 */
export async function finishCampaign(
  em: EntityManager,
  campaignId: string,
  outcome: 'SENT' | 'CANCELLED',
  error?: string,
): Promise<CampaignStatus | 'GONE'> {
  return transaction(em, async (tx) => {
    const row =
      outcome === 'SENT'
        ? await queryOne<{ status: CampaignStatus }>(
            tx,
            `update campaigns set status = 'SENT', sent_at = now(), updated_at = now() where id = ? and status = 'SENDING' returning status`,
            [campaignId],
          )
        : await queryOne<{ status: CampaignStatus }>(
            tx,
            `update campaigns set status = 'CANCELLED', cancelled_at = now(), error = ?, updated_at = now()
             where id = ? and status in ('SCHEDULED','SENDING') returning status`,
            [error ?? null, campaignId],
          );
    const status = row?.status ?? (await queryOne<{ status: CampaignStatus }>(tx, 'select status from campaigns where id = ?', [campaignId]))?.status;
    if (status === 'CANCELLED') {
      await query(tx, `delete from emails where campaign_id = ? and status = 'QUEUED'`, [campaignId]);
    }
    return status ?? 'GONE';
  });
}

