import type { EntityManager } from '@mikro-orm/postgresql';
import { type CursorPage, decodeCursor, encodeCursor } from '../../db/paging';
import { query, queryOne } from '../../db/sql';
import { AppError, notFound } from '../../errors';
import {
  emailIdOfOutboxMessage,
  outboxEntries,
  type OutboxMessage,
  type OutboxSummary,
  readOutboxMessage,
  readOutboxSummary,
} from '../../mail/outbox';

export interface ProjectOutboxSummary extends Omit<OutboxSummary, 'dkim'> {
  emailId: string;
  dkim: string | null;
}

export interface ProjectOutboxMessage extends ProjectOutboxSummary {
  html: string | null;
  text: string | null;
  headers: { name: string; value: string }[];
  attachments: OutboxMessage['attachments'];
}

/** Whether the email is the project's: the folder holds every project's mail. */
async function isProjectEmail(em: EntityManager, projectId: string, emailId: string): Promise<boolean> {
  return (await queryOne(em, 'select 1 from emails where project_id = ? and id = ?::uuid', [projectId, emailId])) !== undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The email id a cursor holds (the last message of the previous page). */
function emailAfter(cursor: string): string {
  const id = decodeCursor(cursor);
  if (!UUID.test(id)) {
    throw new AppError(400, 'INVALID_CURSOR', 'The cursor is not valid', {
      suggestion: 'Pass the cursor exactly as returned by the previous page, or omit it to start over.',
    });
  }
  return id;
}

/**
 * GET /projects/:id/outbox: the project's own messages, newest email first. A message is the
 * project's when the email it was built from (named by its file) is one of the project's rows;
 * account mail (verification, password reset) has no email row and is never listed. The emails
 * are paged in the database in the order they were sent (a file's time is when delivery got to
 * it, which concurrent deliveries shuffle), after the email the cursor names.
 */
export async function listProjectOutbox(
  em: EntityManager,
  dir: string,
  projectId: string,
  page: { limit: number; cursor?: string | undefined },
): Promise<CursorPage<ProjectOutboxSummary>> {
  const fileOf = new Map((await outboxEntries(dir)).flatMap((e) => (e.emailId ? [[e.emailId, e.id] as const] : [])));
  const emailIds = [...fileOf.keys()];
  const after = page.cursor === undefined ? undefined : emailAfter(page.cursor);
  const rows = emailIds.length
    ? await query<{ id: string }>(
        em,
        `select id from emails where project_id = ? and id = any(?::uuid[])
           ${after ? 'and (created_at, id) < (select created_at, id from emails where id = ?::uuid)' : ''}
         order by created_at desc, id desc limit ?`,
        [projectId, emailIds, ...(after ? [after] : []), page.limit + 1],
      )
    : [];
  const total =
    after === undefined && emailIds.length
      ? Number((await queryOne<{ n: string }>(em, 'select count(*) as n from emails where project_id = ? and id = any(?::uuid[])', [projectId, emailIds]))!.n)
      : 0;
  const hasMore = rows.length > page.limit;
  const shown = rows.slice(0, page.limit);
  const summaries = await Promise.all(shown.map((r) => readOutboxSummary(dir, fileOf.get(r.id)!)));
  return {
    // A file deleted since the listing is left out rather than failing the page.
    data: summaries.flatMap((s, i) => (s ? [{ ...s, emailId: shown[i]!.id, dkim: s.dkim ?? null }] : [])),
    cursor: hasMore ? encodeCursor(shown[shown.length - 1]!.id) : null,
    hasMore,
    total,
  };
}

/** GET /projects/:id/outbox/:messageId: one of the project's messages; another project's is 404 like a missing one. */
export async function readProjectOutboxMessage(em: EntityManager, dir: string, projectId: string, id: string): Promise<ProjectOutboxMessage> {
  const emailId = emailIdOfOutboxMessage(id);
  const message = emailId && (await isProjectEmail(em, projectId, emailId)) ? await readOutboxMessage(dir, id) : undefined;
  if (!message || !emailId) throw notFound('message');
  return {
    ...message,
    emailId,
    dkim: message.dkim ?? null,
    html: message.html ?? null,
    text: message.text ?? null,
    headers: message.headers.map(([name, value]) => ({ name, value })),
  };
}
