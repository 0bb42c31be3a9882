import type { EntityManager } from '@mikro-orm/postgresql';
import { normalizeEmail } from '../contacts/contacts';
import type { JsonValue } from '../entities/contact';
import { recordEvent, recordSubscriptionChange } from '../events/events';
import { enforceSendingReputation } from '../projects/security';
import { query, queryOne, transaction } from '../sql';
import { suppressAddress } from '../contacts/suppressions';

/**
 * What happens to an email after the relay took it: opens and clicks (tracked by this service,
 * `GET /t/o|c/:token`) and the delivery, bounce and complaint notifications of the mail
 * infrastructure (`POST /webhooks/notify`).
 *
 * A hard bounce may also be the relay's own refusal of the recipient at send time
 * (recordRelayBounces), recorded the same way.
 *
 * Each email keeps the first time and, for opens and clicks, the count and the last time;
 * campaign stats count these columns. The status only moves forward — SENT → DELIVERED →
 * OPENED → CLICKED — so a late open never turns a CLICKED email back into OPENED. BOUNCED and COMPLAINED override (a complaint
 * over a bounce), except that a *soft* bounce does not undo evidence of arrival (DELIVERED,
 * OPENED, CLICKED) and is itself superseded by it. FAILED (never sent) stays FAILED except for
 * a bounce or complaint.
 *
 * Events go on the email's contact, once per fact: `email.delivered`, `email.opened` (first
 * open), `email.clicked` (first click of each link, data `{emailId, url}`), `email.bounced`
 * (data `bounceType`), `email.complained`. Repeats (a re-opened mail, a notification sent twice)
 * only raise the counts, so replayed requests cannot flood the event history.
 */

export type BounceType = 'hard' | 'soft';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const RANK: Record<'DELIVERED' | 'OPENED' | 'CLICKED', number> = { DELIVERED: 3, OPENED: 4, CLICKED: 5 };

/** SQL for the new status when `target` is observed: forward only (see above). */
const advance = (target: keyof typeof RANK) => `case
    when (case e.status when 'QUEUED' then 0 when 'SENDING' then 1 when 'SENT' then 2 when 'DELIVERED' then 3
            when 'OPENED' then 4 when 'CLICKED' then 5 else 99 end) < ${RANK[target]}
      or (e.status = 'BOUNCED' and e.bounce_type = 'soft') then '${target}'
    else e.status end`;

interface Touched {
  project_id: string;
  contact_id: string | null;
  to_email: string;
  first: boolean;
}

/** A timestamp reported by the infrastructure, never in the future; now when absent. */
const reportedTime = (at: Date | undefined) => (at && !Number.isNaN(at.getTime()) && at.getTime() < Date.now() ? at : new Date());

async function event(em: EntityManager, row: Touched, name: string, data: Record<string, JsonValue>): Promise<void> {
  // The contact was deleted since: the email's columns still count, there is nobody to record on.
  if (row.contact_id) await recordEvent(em, row.project_id, row.contact_id, name, data);
}

/** An open (the pixel was fetched). False for an unknown email. */
export async function recordOpen(em: EntityManager, emailId: string): Promise<boolean> {
  return transaction(em, async (tx) => {
    const row = await queryOne<Touched>(
      tx,
      `update emails e set opened_at = coalesce(e.opened_at, now()), last_opened_at = now(), open_count = e.open_count + 1,
         status = ${advance('OPENED')}, updated_at = now()
       from (select id, opened_at from emails where id = ? for update) old
       where e.id = old.id
       returning e.project_id, e.contact_id, e.to_email, old.opened_at is null as first`,
      [emailId],
    );
    if (!row) return false;
    if (row.first) await event(tx, row, 'email.opened', { emailId });
    return true;
  });
}

/**
 * A click on a tracked link. A click is also an open: a mail read with images blocked gets its
 * first open here (`email.opened` with `viaClick: true`).
 */
export async function recordClick(em: EntityManager, emailId: string, url: string): Promise<boolean> {
  return transaction(em, async (tx) => {
    const row = await queryOne<Touched & { first_click: boolean }>(
      tx,
      `update emails e set clicked_at = coalesce(e.clicked_at, now()), last_clicked_at = now(), click_count = e.click_count + 1,
         opened_at = coalesce(e.opened_at, now()), open_count = case when e.opened_at is null then e.open_count + 1 else e.open_count end,
         last_opened_at = case when e.opened_at is null then now() else e.last_opened_at end,
         status = ${advance('CLICKED')}, updated_at = now()
       from (select id, opened_at, clicked_at from emails where id = ? for update) old
       where e.id = old.id
       returning e.project_id, e.contact_id, e.to_email, old.opened_at is null as first, old.clicked_at is null as first_click`,
      [emailId],
    );
    if (!row) return false;
    if (row.first) await event(tx, row, 'email.opened', { emailId, viaClick: true });
    // One event per link and email; the row lock above serialises concurrent clicks of this email.
    const seen =
      !row.first_click &&
      row.contact_id !== null &&
      (await queryOne(
        tx,
        `select 1 from events where contact_id = ? and name = 'email.clicked' and data->>'emailId' = ? and data->>'url' = ? limit 1`,
        [row.contact_id, emailId, url],
      )) !== undefined;
    if (!seen) await event(tx, row, 'email.clicked', { emailId, url });
    return true;
  });
}

export async function recordDelivered(em: EntityManager, emailId: string, at?: Date): Promise<boolean> {
  return transaction(em, async (tx) => {
    const row = await queryOne<Touched>(
      tx,
      `update emails e set delivered_at = coalesce(e.delivered_at, ?), status = ${advance('DELIVERED')}, updated_at = now()
       from (select id, delivered_at from emails where id = ? for update) old
       where e.id = old.id
       returning e.project_id, e.contact_id, e.to_email, old.delivered_at is null as first`,
      [reportedTime(at), emailId],
    );
    if (!row) return false;
    if (row.first) await event(tx, row, 'email.delivered', { emailId });
    return true;
  });
}

/**
 * A bounce. Hard: the address is suppressed in the project and the contact unsubscribed (when
 * the email went to the contact's own address, not a workflow's custom recipient). Soft: the
 * email and its event only.
 */
export async function recordBounce(
  em: EntityManager,
  emailId: string,
  bounceType: BounceType,
  opts: { at?: Date; diagnostic?: string } = {},
): Promise<boolean> {
  return transaction(em, async (tx) => {
    const projectId = await bounce(tx, emailId, bounceType, opts);
    if (projectId) await enforceSendingReputation(tx, projectId);
    return projectId !== undefined;
  });
}

/** A relay's permanent refusal of an email's recipient: what the relay answered. */
export interface RelayRefusal {
  emailId: string;
  reply: string;
  /** Hard (a 5xx) unless the relay kept answering 4xx until the retries ran out: soft. */
  bounceType?: BounceType;
}

/**
 * Bounces the relay answered itself (hard: a 5xx to RCPT TO or to the message; soft: 4xx replies
 * until the retries ran out), recorded as a
 * notification's would be (recordBounce), and besides: the reply is the email's error and relay
 * response, its lease ends, and a campaign email's recipient is settled FAILED. One transaction;
 * the reputation rule runs once per project.
 */
export async function recordRelayBounces(em: EntityManager, refusals: RelayRefusal[]): Promise<void> {
  if (refusals.length === 0) return;
  await transaction(em, async (tx) => {
    const projects = new Set<string>();
    for (const r of refusals) {
      const projectId = await bounce(tx, r.emailId, r.bounceType ?? 'hard', { diagnostic: r.reply, relayReply: r.reply });
      if (projectId) projects.add(projectId);
    }
    for (const projectId of [...projects].sort()) await enforceSendingReputation(tx, projectId);
  });
}

/** One bounce, inside the caller's transaction; the email's project, or undefined for an unknown email. */
async function bounce(
  tx: EntityManager,
  emailId: string,
  bounceType: BounceType,
  opts: { at?: Date; diagnostic?: string; relayReply?: string },
): Promise<string | undefined> {
  const reply = opts.relayReply ?? null;
  const row = await queryOne<Touched & { previous_type: BounceType | null; campaign_id: string | null }>(
    tx,
    `update emails e set bounced_at = coalesce(e.bounced_at, ?),
       bounce_type = case when e.bounce_type = 'hard' then 'hard' else ? end,
       status = case
         when e.status = 'COMPLAINED' then e.status
         when ? = 'hard' then 'BOUNCED'
         when e.status in ('DELIVERED','OPENED','CLICKED') then e.status
         else 'BOUNCED' end,
       error = coalesce(?, e.error), smtp_response = coalesce(?, e.smtp_response),
       lease_until = case when ?::text is null then e.lease_until end,
       lease_owner = case when ?::text is null then e.lease_owner end,
       updated_at = now()
     from (select id, bounced_at, bounce_type from emails where id = ? for update) old
     where e.id = old.id
     returning e.project_id, e.contact_id, e.to_email, e.campaign_id, old.bounced_at is null as first, old.bounce_type as previous_type`,
    [reportedTime(opts.at), bounceType, bounceType, reply, reply, reply, reply, emailId],
  );
  if (!row) return undefined;
  if (row.first || (bounceType === 'hard' && row.previous_type !== 'hard')) {
    await event(tx, row, 'email.bounced', { emailId, bounceType, ...(opts.diagnostic ? { diagnostic: opts.diagnostic } : {}) });
  }
  if (bounceType === 'hard') {
    await suppressAddress(tx, row.project_id, row.to_email, 'hard_bounce', emailId);
    await unsubscribeRecipient(tx, row);
  }
  // The relay refused a campaign email, whichever sender it was (a batch, or the engine after a deferral).
  if (reply !== null && row.campaign_id && row.contact_id) {
    await query(tx, `update campaign_recipients set status = 'FAILED', email_id = ? where campaign_id = ? and contact_id = ?`, [
      emailId,
      row.campaign_id,
      row.contact_id,
    ]);
  }
  return row.project_id;
}

/** A spam complaint: the contact is unsubscribed and the address suppressed. */
export async function recordComplaint(em: EntityManager, emailId: string, at?: Date): Promise<boolean> {
  return transaction(em, async (tx) => {
    const row = await queryOne<Touched>(
      tx,
      `update emails e set complained_at = coalesce(e.complained_at, ?), status = 'COMPLAINED', updated_at = now()
       from (select id, complained_at from emails where id = ? for update) old
       where e.id = old.id
       returning e.project_id, e.contact_id, e.to_email, old.complained_at is null as first`,
      [reportedTime(at), emailId],
    );
    if (!row) return false;
    if (row.first) await event(tx, row, 'email.complained', { emailId });
    await suppressAddress(tx, row.project_id, row.to_email, 'complaint', emailId);
    await unsubscribeRecipient(tx, row);
    await enforceSendingReputation(tx, row.project_id);
    return true;
  });
}

/** Unsubscribes the email's contact if the email went to the contact's address, with contact.unsubscribed. */
async function unsubscribeRecipient(tx: EntityManager, row: Touched): Promise<void> {
  if (!row.contact_id) return;
  const changed = await queryOne<{ previous: boolean }>(
    tx,
    `update contacts c set subscribed = false, updated_at = now()
     from (select id, subscribed as previous from contacts where id = ? and project_id = ? and email = ? and subscribed for update) old
     where c.id = old.id returning old.previous`,
    [row.contact_id, row.project_id, normalizeEmail(row.to_email)],
  );
  if (changed) await recordSubscriptionChange(tx, row.project_id, row.contact_id, changed.previous, false);
}

/** How a notification names its email: our id, our Message-ID, or only the recipient. */
export interface EmailReference {
  emailId?: string;
  messageIds?: string[];
  recipients?: string[];
}

/** `<id@domain>` (or without brackets) → id, when the local part is one of our email ids. */
export function emailIdFromMessageId(messageId: string): string | undefined {
  const local = /^\s*<?([^@<>\s]+)@[^>]*>?\s*$/.exec(messageId)?.[1];
  return local && UUID.test(local) ? local.toLowerCase() : undefined;
}

/**
 * The email a notification is about. By id or Message-ID first; failing those, the latest email
 * sent to the recipient (instance-wide: the endpoint serves the whole installation).
 */
export async function findNotifiedEmail(em: EntityManager, ref: EmailReference): Promise<string | undefined> {
  const ids = [ref.emailId, ...(ref.messageIds ?? []).map(emailIdFromMessageId)].filter(
    (id): id is string => id !== undefined && UUID.test(id),
  );
  if (ids.length) {
    const rows = await query<{ id: string }>(em, 'select id from emails where id = any(?::uuid[])', [[...new Set(ids.map((i) => i.toLowerCase()))]]);
    if (rows[0]) return rows[0].id;
  }
  for (const recipient of ref.recipients ?? []) {
    const row = await queryOne<{ id: string }>(
      em,
      `select id from emails where lower(to_email) = ? and sent_at is not null order by sent_at desc limit 1`,
      [normalizeEmail(recipient)],
    );
    if (row) return row.id;
  }
  return undefined;
}

export type NotificationType = 'delivered' | 'bounced' | 'complained';

export interface DeliveryNotification extends EmailReference {
  type: NotificationType;
  bounceType?: BounceType;
  timestamp?: Date;
  diagnostic?: string;
}

/** Applies one notification; `ignored` when no email of ours matches it. */
export async function applyNotification(em: EntityManager, n: DeliveryNotification): Promise<'processed' | 'ignored'> {
  const emailId = await findNotifiedEmail(em, n);
  if (!emailId) return 'ignored';
  const done =
    n.type === 'delivered'
      ? await recordDelivered(em, emailId, n.timestamp)
      : n.type === 'bounced'
        ? await recordBounce(em, emailId, n.bounceType ?? 'hard', { at: n.timestamp, diagnostic: n.diagnostic })
        : await recordComplaint(em, emailId, n.timestamp);
  return done ? 'processed' : 'ignored';
}
