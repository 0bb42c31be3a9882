import type { EntityManager } from '@mikro-orm/postgresql';
import { emailIdFromMessageId } from './engagement';
import { query, queryOne } from '../sql';

/**
 * The emails a received message is about (mail/inbound): the one a bounce address names, and the
 * one a reply or a returned report names by our Message-ID (`<email id@domain>`).
 */

/** The project of an email, undefined when there is no such email. */
export async function emailProject(em: EntityManager, emailId: string): Promise<string | undefined> {
  const row = await queryOne<{ project_id: string }>(em, 'select project_id from emails where id = ?::uuid', [emailId]);
  return row?.project_id;
}

/** The first of the Message-IDs that is one of the project's emails, as its email id. */
export async function projectEmailByMessageId(em: EntityManager, projectId: string, messageIds: readonly string[]): Promise<string | undefined> {
  const ids = [...new Set(messageIds.map(emailIdFromMessageId).filter((id): id is string => id !== undefined))];
  if (ids.length === 0) return undefined;
  const rows = await query<{ id: string }>(em, 'select id from emails where id = any(?::uuid[]) and project_id = ?', [ids, projectId]);
  const found = new Set(rows.map((r) => r.id));
  return ids.find((id) => found.has(id));
}
