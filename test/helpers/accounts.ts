import { randomUUID } from 'node:crypto';
import type { Role } from '../../db/accounts/members';
import { newId } from '../../db/ids';
import { hashPassword } from '../../db/accounts/passwords';
import { query } from '../../db/sql';
import type { SessionUser } from '../../db/accounts/users';
import { SESSION_COOKIE, signSession } from '../../api/session';
import type { TestEnv } from './env';

export interface TestUser extends SessionUser {
  password: string;
  /** `Cookie` header value of a valid session of this user. */
  cookie: string;
}

/**
 * A user made straight in the database, with a session cookie signed like POST /auth/login signs it,
 * for tests of routes that need a signed-in user (the auth routes are tested on their own).
 */
export async function createTestUser(env: TestEnv, opts: { email?: string; password?: string; verified?: boolean } = {}): Promise<TestUser> {
  const id = newId('usr');
  const email = (opts.email ?? `user-${randomUUID().slice(0, 8)}@example.com`).toLowerCase();
  const password = opts.password ?? 'correct horse battery staple';
  await query(
    env.orm.em.fork(),
    `insert into users (id, email, password_hash, email_verified_at) values (?, ?, ?, ?)`,
    [id, email, await hashPassword(password), opts.verified === false ? null : new Date()],
  );
  const user: SessionUser = { id, email, name: null, emailVerified: opts.verified !== false, sessionVersion: 1 };
  const token = await signSession(env.deps.sessionSecret, user);
  return { ...user, password, cookie: `${SESSION_COOKIE}=${token}` };
}

export async function addTestMember(env: TestEnv, projectId: string, userId: string, role: Role): Promise<void> {
  await query(env.orm.em.fork(), `insert into project_members (project_id, user_id, role) values (?, ?, ?)`, [projectId, userId, role]);
}

/** Headers of a session request to a project's routes. */
export const asMember = (user: Pick<TestUser, 'cookie'>, projectId: string) => ({ Cookie: user.cookie, 'X-Project-Id': projectId });
