import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../ids';
import { query, queryOne } from '../sql';

/**
 * Account mail (verification, password reset) waiting for the sendSystemEmail workflow. The
 * bodies carry a live token, so they live here rather than in workflow history, and are blanked
 * once the relay has taken the message.
 */
export interface SystemEmail {
  id: string;
  to: string;
  subject: string;
  text: string;
  html: string;
  sentAt: Date | null;
}

export async function insertSystemEmail(em: EntityManager, mail: Omit<SystemEmail, 'id' | 'sentAt'>): Promise<string> {
  const id = newId('sml');
  await query(em, `insert into system_emails (id, to_email, subject, text_body, html_body) values (?, ?, ?, ?, ?)`, [
    id,
    mail.to,
    mail.subject,
    mail.text,
    mail.html,
  ]);
  return id;
}

export async function loadSystemEmail(em: EntityManager, id: string): Promise<SystemEmail | undefined> {
  const row = await queryOne<{ id: string; to_email: string; subject: string; text_body: string; html_body: string; sent_at: Date | string | null }>(
    em,
    `select id, to_email, subject, text_body, html_body, sent_at from system_emails where id = ?`,
    [id],
  );
  return row && { id: row.id, to: row.to_email, subject: row.subject, text: row.text_body, html: row.html_body, sentAt: row.sent_at === null ? null : new Date(row.sent_at) };
}

/** Drops the bodies (and the token in them); `sent` also records that the relay accepted the message. */
export async function closeSystemEmail(em: EntityManager, id: string, sent: boolean): Promise<void> {
  await query(
    em,
    `update system_emails set text_body = '', html_body = '', sent_at = case when ? then coalesce(sent_at, now()) else sent_at end where id = ?`,
    [sent, id],
  );
}
