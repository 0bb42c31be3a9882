import type { EntityManager } from '@mikro-orm/postgresql';
import { queryOne } from './sql';

export interface SessionUser {
  id: string;
  email: string;
  name: string | null;
  emailVerified: boolean;
  sessionVersion: number;
}

export async function findSessionUser(em: EntityManager, id: string): Promise<SessionUser | null> {
  const row = await queryOne<{ id: string; email: string; name: string | null; verified: boolean; session_version: number }>(
    em,
    `select id, email, name, email_verified_at is not null as verified, session_version from users where id = ?`,
    [id],
  );
  return row ? { id: row.id, email: row.email, name: row.name, emailVerified: row.verified, sessionVersion: row.session_version } : null;
}
