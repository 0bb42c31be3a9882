import type { EntityManager } from '@mikro-orm/postgresql';
import { query, queryOne } from '../sql';

/**
 * A signed session cookie stays valid until it expires unless its id is on this list: signing out
 * puts it here, so a copy of the cookie (another tab, a stolen one) stops working at once.
 */
export async function revokeSession(em: EntityManager, jti: string, expiresAt: Date): Promise<void> {
  await query(em, 'insert into revoked_sessions (jti, expires_at) values (?, ?) on conflict (jti) do nothing', [jti, expiresAt]);
}

export async function isSessionRevoked(em: EntityManager, jti: string): Promise<boolean> {
  return (await queryOne(em, 'select 1 from revoked_sessions where jti = ?', [jti])) !== undefined;
}

/** Entries of sessions that have expired on their own: the signature check refuses those anyway. */
export async function pruneRevokedSessions(em: EntityManager): Promise<void> {
  await query(em, 'delete from revoked_sessions where expires_at < now()', []);
}
