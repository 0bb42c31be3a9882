import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AttachmentFile, StoredEmail } from '../../mail/compose';
import { BILLING_CATEGORIES } from '../billing/allowance';
import { recordEvent } from '../events/events';
import { query, queryOne, transaction } from '../sql';

export const EMAIL_STATUSES = ['QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'OPENED', 'CLICKED', 'BOUNCED', 'COMPLAINED', 'FAILED'] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

/** Where an email came from is what billing counts it under. */
export const EMAIL_SOURCES = BILLING_CATEGORIES;
export type EmailSource = (typeof EMAIL_SOURCES)[number];

/** Attachments are stored once per request; every recipient's email points at the same set. */
export async function createAttachmentSet(em: EntityManager, projectId: string, files: AttachmentFile[]): Promise<string> {
  const id = randomUUID();
  await query(em, 'insert into attachment_sets (id, project_id, files) values (?, ?, ?::jsonb)', [
    id,
    projectId,
    JSON.stringify(files),
  ]);
  return id;
}

export interface EmailForDelivery {
  email: StoredEmail;
  projectId: string;
  status: EmailStatus;
  /** The recipient is on the project's suppression list (db/contacts/suppressions.ts): never hand it to the relay. */
  suppressed: boolean;
  /** The project is disabled (db/projects/security.ts): it sends nothing. */
  projectDisabled: boolean;
  /** The sending domain's DKIM key, when the email has a domain. */
  dkim: { domain: string; selector: string; privateKeyPem: string } | undefined;
}

/** The columns a delivery attempt selects (DELIVERY_COLUMNS over `e`, `p`, `a`, `d`), as toDeliverable reads them. */
export interface DeliveryRow {
  id: string;
  project_id: string;
  status: EmailStatus;
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

/** Over an email `e` joined with its project `p`, attachment set `a` and domain `d`. */
export const DELIVERY_COLUMNS = `e.id, e.project_id, e.status, e.to_email, e.to_name, e.from_email, e.from_name, e.reply_to, e.subject,
  e.body, e.headers, a.files,
  exists (select 1 from suppressions s where s.project_id = e.project_id and s.email = lower(e.to_email)) as suppressed,
  p.disabled as project_disabled, d.domain as dkim_domain, d.dkim_selector, d.dkim_private_key`;

/** The DKIM key of DELIVERY_COLUMNS' `d` columns. */
export function dkimOf(row: Pick<DeliveryRow, 'dkim_domain' | 'dkim_selector' | 'dkim_private_key'>): EmailForDelivery['dkim'] {
  return row.dkim_domain && row.dkim_selector && row.dkim_private_key
    ? { domain: row.dkim_domain, selector: row.dkim_selector, privateKeyPem: row.dkim_private_key }
    : undefined;
}

export function toDeliverable(row: DeliveryRow): EmailForDelivery {
  return {
    projectId: row.project_id,
    status: row.status,
    suppressed: row.suppressed,
    projectDisabled: row.project_disabled,
    dkim: dkimOf(row),
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
  };
}

/**
 * Everything a delivery attempt needs, in one round trip: delivery runs once per email, and each
 * separate lookup was a query of its own.
 */
export async function loadEmailForDelivery(em: EntityManager, id: string): Promise<EmailForDelivery | undefined> {
  const row = await queryOne<DeliveryRow>(
    em,
    `select ${DELIVERY_COLUMNS}
     from emails e
     join projects p on p.id = e.project_id
     left join attachment_sets a on a.id = e.attachment_set_id
     left join domains d on d.id = e.domain_id
     where e.id = ?`,
    [id],
  );
  return row && toDeliverable(row);
}

/**
 * An attempt that will be retried (a 4xx reply, the relay unreachable): the email stays SENDING
 * and says why it is not out yet. `relayResponse` is what the relay answered, when it was reached
 * or refused the connection; a failure of our own (composing the message) leaves the last one.
 */
export async function markEmailRetrying(em: EntityManager, id: string, error: string, relayResponse: string | null): Promise<void> {
  await query(
    em,
    `update emails set error = ?, smtp_response = coalesce(?, smtp_response), updated_at = now()
     where id = ? and status in ('QUEUED','SENDING')`,
    [error, relayResponse, id],
  );
}

/** The email was written longer ago than its retries may last (SEND_RETRY_FOR_SECONDS): it is not tried again. */
export async function retriesRunOut(em: EntityManager, id: string, retryForSeconds: number): Promise<boolean> {
  const row = await queryOne<{ over: boolean }>(em, 'select created_at < now() - make_interval(secs => ?) as over from emails where id = ?', [
    retryForSeconds,
    id,
  ]);
  return row?.over ?? false;
}

/**
 * SENT once, with its `email.sent` event; a repeat (a retried activity) changes nothing. An open
 * or a delivery notification may already have moved the status on (they can arrive before this
 * runs): then only sent_at and the event are written.
 */
export async function markEmailSent(em: EntityManager, id: string, smtpResponse: string): Promise<boolean> {
  return transaction(em, async (tx) => {
    const row = await queryOne<{ project_id: string; contact_id: string | null }>(
      tx,
      `update emails set status = case when status in ('QUEUED','SENDING') then 'SENT' else status end,
         smtp_response = ?, error = null, sent_at = now(), updated_at = now(), lease_until = null, lease_owner = null
       where id = ? and sent_at is null and status <> 'FAILED' returning project_id, contact_id`,
      [smtpResponse, id],
    );
    if (!row) return false;
    await recordEvent(tx, row.project_id, row.contact_id, 'email.sent', { emailId: id });
    return true;
  });
}

/** FAILED for good; `relayResponse` when the relay refused it (a 5xx reply), not for our own refusals. */
export async function markEmailFailed(em: EntityManager, id: string, error: string, relayResponse: string | null = null): Promise<void> {
  await query(
    em,
    `update emails set status = 'FAILED', error = ?, smtp_response = coalesce(?, smtp_response), lease_until = null, lease_owner = null, updated_at = now()
     where id = ? and status in ('QUEUED','SENDING')`,
    [error, relayResponse, id],
  );
}

/**
 * FAILED without going to the relay (a suppressed address, a disabled project) after the engine
 * claimed it: the attempt the claim counted is taken back, since `attempts` counts the times the
 * relay was offered the email.
 */
export async function refuseClaimedEmail(em: EntityManager, id: string, error: string): Promise<void> {
  await query(
    em,
    `update emails set status = 'FAILED', error = ?, attempts = greatest(attempts - 1, 0), lease_until = null, lease_owner = null, updated_at = now()
     where id = ? and status in ('QUEUED','SENDING')`,
    [error, id],
  );
}

export async function getEmailStatus(em: EntityManager, projectId: string, id: string): Promise<EmailStatus | undefined> {
  const row = await queryOne<{ status: EmailStatus }>(em, 'select status from emails where project_id = ? and id = ?', [projectId, id]);
  return row?.status;
}
