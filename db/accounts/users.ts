import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict } from '../../errors';
import { newId } from '../ids';
import { decoyHash, hashPassword, verifyPassword } from './passwords';
import { hitRateLimit } from '../projects/rate-limit';
import { query, queryOne } from '../sql';
import { consumeUserToken, queueTokenEmail, type TokenMail } from './user-tokens';

export interface SessionUser {
  id: string;
  email: string;
  name: string | null;
  emailVerified: boolean;
  sessionVersion: number;
}

/** A user as the API shows it: never the password hash, never the session version. */
export interface AccountUser {
  id: string;
  email: string;
  name: string | null;
  emailVerified: boolean;
  createdAt: string;
}

interface UserRow {
  id: string;
  email: string;
  name: string | null;
  verified: boolean;
  session_version: number;
  /** A string or a Date, depending on the driver's settings. */
  created_at: Date | string;
}

const USER_COLUMNS = `id, email, name, email_verified_at is not null as verified, session_version, created_at`;

const toSessionUser = (row: UserRow): SessionUser => ({
  id: row.id,
  email: row.email,
  name: row.name,
  emailVerified: row.verified,
  sessionVersion: row.session_version,
});

const toAccountUser = (row: UserRow): AccountUser => ({
  id: row.id,
  email: row.email,
  name: row.name,
  emailVerified: row.verified,
  createdAt: new Date(row.created_at).toISOString(),
});

export async function findSessionUser(em: EntityManager, id: string): Promise<SessionUser | null> {
  const row = await queryOne<UserRow>(em, `select ${USER_COLUMNS} from users where id = ?`, [id]);
  return row ? toSessionUser(row) : null;
}

export async function findAccountUser(em: EntityManager, id: string): Promise<AccountUser | null> {
  const row = await queryOne<UserRow>(em, `select ${USER_COLUMNS} from users where id = ?`, [id]);
  return row ? toAccountUser(row) : null;
}

export interface SignedIn {
  /** What the session cookie is signed from. */
  session: SessionUser;
  user: AccountUser;
}

/**
 * Creates the account and queues its verification email, in one transaction: should the mail not
 * be queued (Temporal refuses), no account is left behind and the client can sign up again.
 * `email` arrives lower-cased and trimmed. Sign-ups are counted per client IP like account mail
 * requests, since each one sends an email.
 */
export async function signUp(
  em: EntityManager,
  input: { email: string; password: string; name?: string },
  mail: TokenMail,
  limit: AttemptLimit,
): Promise<SignedIn> {
  await countAttempt(em, [`signup-ip:${limit.ip}`], limit, 'sign-ups');
  const passwordHash = await hashPassword(input.password);
  return em.transactional(async (tx) => {
    const row = await queryOne<UserRow>(
      tx,
      `insert into users (id, email, password_hash, name) values (?, ?, ?, ?)
       on conflict (email) do nothing
       returning ${USER_COLUMNS}`,
      [newId('usr'), input.email, passwordHash, input.name ?? null],
    );
    if (!row) {
      throw conflict(
        'An account with this email already exists',
        'Sign in with POST /auth/login, or reset the password with POST /auth/request-password-reset.',
        'EMAIL_ALREADY_REGISTERED',
      );
    }
    await queueTokenEmail(tx, mail, { id: row.id, email: row.email }, 'verify-email');
    return { session: toSessionUser(row), user: toAccountUser(row) };
  });
}

/**
 * Signs in the account of the email a provider vouches for, creating it when there is none (and
 * sign-ups are allowed). The provider verified the address, so the account counts as verified; an
 * account created this way has a random password nobody knows, until a password reset sets one.
 *
 * An existing account nobody had verified may have been opened by someone else with this email
 * (to be there when its owner arrives): its password is replaced by a random one and its sessions
 * end, so only the owner, signed in through the provider, holds it from now on.
 */
export async function signInWithProvider(
  em: EntityManager,
  identity: { email: string; name: string | null },
  opts: { allowSignup: boolean },
): Promise<SignedIn & { created: boolean }> {
  const found = await queryOne<UserRow>(em, `select ${USER_COLUMNS} from users where email = ?`, [identity.email]);
  if (found?.verified) return { session: toSessionUser(found), user: toAccountUser(found), created: false };
  if (found) {
    const claimed = await queryOne<UserRow>(
      em,
      `update users set password_hash = ?, session_version = session_version + 1, email_verified_at = now()
       where id = ? and email_verified_at is null returning ${USER_COLUMNS}`,
      [await hashPassword(randomBytes(32).toString('base64url')), found.id],
    );
    // Verified meanwhile (its owner followed the emailed link): then it stays as it is.
    const row = claimed ?? (await queryOne<UserRow>(em, `select ${USER_COLUMNS} from users where id = ?`, [found.id]))!;
    return { session: toSessionUser(row), user: toAccountUser(row), created: false };
  }
  if (!opts.allowSignup) {
    throw new AppError(403, 'SIGNUPS_DISABLED', 'Sign-ups are disabled on this deployment, and no account uses this email', {
      suggestion: 'Ask the operator for an account (DISABLE_SIGNUPS is set).',
    });
  }
  const row = await queryOne<UserRow>(
    em,
    `insert into users (id, email, password_hash, name, email_verified_at) values (?, ?, ?, ?, now())
     on conflict (email) do nothing returning ${USER_COLUMNS}`,
    [newId('usr'), identity.email, await hashPassword(randomBytes(32).toString('base64url')), identity.name],
  );
  // Signed up meanwhile: that account goes through the rules above.
  if (!row) return signInWithProvider(em, identity, opts);
  return { session: toSessionUser(row), user: toAccountUser(row), created: true };
}

const invalidCredentials = () =>
  new AppError(401, 'INVALID_CREDENTIALS', 'The email or password is incorrect', {
    suggestion: 'Check both, or reset the password with POST /auth/request-password-reset.',
  });

/**
 * Counts one attempt in each bucket's shared one-minute window (db/projects/rate-limit.ts); over the limit
 * in any of them → 429 with the wait until that window ends.
 */
async function countAttempt(em: EntityManager, buckets: string[], { perMinute, now }: AttemptLimit, what: string): Promise<void> {
  const windows = [];
  for (const bucket of buckets) windows.push(await hitRateLimit(em, bucket, now));
  const over = windows.filter((w) => w.count > perMinute);
  if (over.length === 0) return;
  const wait = Math.max(...over.map((w) => w.resetSeconds));
  throw new AppError(429, 'RATE_LIMIT_EXCEEDED', `Too many ${what}: at most ${perMinute} per minute`, {
    suggestion: `Wait ${wait} seconds before trying again.`,
    headers: { 'Retry-After': String(wait) },
  });
}

/**
 * Checks a login. Attempts are counted per client IP and per account (email) before any password
 * work. An unknown email is compared against a decoy hash and answers exactly like a wrong
 * password, so neither the reply nor its timing tells them apart.
 */
export async function logIn(
  em: EntityManager,
  input: { email: string; password: string },
  limit: AttemptLimit,
): Promise<SignedIn> {
  await countAttempt(em, [`login-ip:${limit.ip}`, `login-account:${input.email}`], limit, 'sign-in attempts');
  const row = await queryOne<UserRow & { password_hash: string }>(em, `select ${USER_COLUMNS}, password_hash from users where email = ?`, [
    input.email,
  ]);
  const matches = await verifyPassword(input.password, row?.password_hash ?? (await decoyHash()));
  if (!row || !matches) throw invalidCredentials();
  return { session: toSessionUser(row), user: toAccountUser(row) };
}

/**
 * Sign-ins, sign-ups and account mail requests are counted per client IP (and per account where
 * there is one) in one-minute windows, so nobody can guess passwords or flood a mailbox through us.
 * The limit applies to unknown addresses alike: a 429 says nothing about whether an account exists.
 */
export interface AttemptLimit {
  ip: string;
  perMinute: number;
  /** The request's time (db/clock.ts): which window it counts in. */
  now: Date;
}

/** A new verification email for a signed-in user whose address is not verified yet. */
export async function requestVerification(em: EntityManager, user: SessionUser, mail: TokenMail, limit: AttemptLimit): Promise<void> {
  if (user.emailVerified) {
    throw conflict('This email address is already verified', 'Nothing to do.', 'EMAIL_ALREADY_VERIFIED');
  }
  await countAttempt(em, [`mail-ip:${limit.ip}`, `mail-account:${user.email}`], limit, 'account email requests');
  await em.transactional((tx) => queueTokenEmail(tx, mail, user, 'verify-email'));
}

export async function verifyEmail(em: EntityManager, token: string): Promise<AccountUser> {
  return em.transactional(async (tx) => {
    const userId = await consumeUserToken(tx, token, 'verify-email');
    const row = await queryOne<UserRow>(
      tx,
      `update users set email_verified_at = coalesce(email_verified_at, now()), updated_at = now() where id = ? returning ${USER_COLUMNS}`,
      [userId],
    );
    return toAccountUser(row!);
  });
}

/** Queues a reset email when the account exists; says nothing either way (the caller answers the same). */
export async function requestPasswordReset(em: EntityManager, email: string, mail: TokenMail, limit: AttemptLimit): Promise<void> {
  await countAttempt(em, [`mail-ip:${limit.ip}`, `mail-account:${email}`], limit, 'account email requests');
  await em.transactional(async (tx) => {
    const row = await queryOne<{ id: string; email: string }>(tx, `select id, email from users where email = ?`, [email]);
    if (row) await queueTokenEmail(tx, mail, row, 'reset-password');
  });
}

/**
 * Sets the new password and bumps the session version, so every session signed before (a thief's
 * included) stops working. Following the emailed link also proves the address is the user's.
 */
export async function resetPassword(em: EntityManager, token: string, password: string): Promise<void> {
  const passwordHash = await hashPassword(password);
  await em.transactional(async (tx) => {
    const userId = await consumeUserToken(tx, token, 'reset-password');
    await query(
      tx,
      `update users set password_hash = ?, session_version = session_version + 1,
         email_verified_at = coalesce(email_verified_at, now()), updated_at = now()
       where id = ?`,
      [passwordHash, userId],
    );
  });
}
