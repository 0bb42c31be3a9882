import type { EntityManager } from '@mikro-orm/postgresql';
import { normalizeEmail } from './contacts';
import { query, queryOne } from '../sql';

/**
 * Addresses a project no longer mails: a hard bounce (the mailbox does not exist) or a spam
 * complaint. Enforced at delivery (`deliverEmail`), so every path — /v1/send, workflows,
 * campaigns — is covered: the email is marked FAILED with error `suppressed` and never handed to
 * the relay. Unsubscribing stops marketing mail only; a suppression stops transactional mail too.
 */
export type SuppressionReason = 'hard_bounce' | 'complaint';

export const SUPPRESSED_ERROR = 'suppressed';

/** Adds the address; an existing suppression (whatever its reason) is kept as it was. */
export async function suppressAddress(
  em: EntityManager,
  projectId: string,
  email: string,
  reason: SuppressionReason,
  emailId: string | null = null,
): Promise<boolean> {
  const rows = await query(
    em,
    `insert into suppressions (project_id, email, reason, email_id) values (?, ?, ?, ?)
     on conflict (project_id, email) do nothing returning email`,
    [projectId, normalizeEmail(email), reason, emailId],
  );
  return rows.length > 0;
}

export async function isSuppressed(em: EntityManager, projectId: string, email: string): Promise<boolean> {
  const row = await queryOne(em, 'select 1 from suppressions where project_id = ? and email = ?', [projectId, normalizeEmail(email)]);
  return row !== undefined;
}

/** Of these addresses, the suppressed ones (lower-cased): for batch senders such as campaigns. */
export async function suppressedAmong(em: EntityManager, projectId: string, emails: string[]): Promise<Set<string>> {
  if (emails.length === 0) return new Set();
  const rows = await query<{ email: string }>(em, 'select email from suppressions where project_id = ? and email = any(?)', [
    projectId,
    emails.map(normalizeEmail),
  ]);
  return new Set(rows.map((r) => r.email));
}

export async function removeSuppression(em: EntityManager, projectId: string, email: string): Promise<boolean> {
  const rows = await query(em, 'delete from suppressions where project_id = ? and email = ? returning email', [
    projectId,
    normalizeEmail(email),
  ]);
  return rows.length > 0;
}
