import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../../errors';
import { passwordResetEmail, verificationEmail } from '../../mail/account-emails';
import { query, queryOne } from '../sql';
import { insertSystemEmail } from './system-emails';

export type TokenPurpose = 'verify-email' | 'reset-password';

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * A new single-use token for the user: 32 random bytes, base64url. Only its SHA-256 is stored,
 * so the token exists in the email alone. Earlier unused tokens of the same purpose stop
 * working: only the latest email's link is valid.
 */
async function issueUserToken(em: EntityManager, userId: string, purpose: TokenPurpose, ttlMinutes: number): Promise<string> {
  await query(
    em,
    `update user_tokens set expires_at = now() where user_id = ? and purpose = ? and used_at is null and expires_at > now()`,
    [userId, purpose],
  );
  const token = randomBytes(32).toString('base64url');
  await query(
    em,
    `insert into user_tokens (token_hash, user_id, purpose, expires_at) values (?, ?, ?, now() + make_interval(mins => ?))`,
    [hashToken(token), userId, purpose, ttlMinutes],
  );
  return token;
}

const invalidToken = (purpose: TokenPurpose) =>
  new AppError(400, 'INVALID_TOKEN', 'This link is not valid: it has expired, was already used, or was replaced by a newer one', {
    suggestion:
      purpose === 'verify-email'
        ? 'Request a new verification email with POST /auth/request-verification (signed in) and use the link in it.'
        : 'Request a new reset email with POST /auth/request-password-reset and use the link in it.',
  });

/**
 * Spends the token and returns its user. One statement claims it, so two concurrent requests with
 * the same token cannot both succeed; expired, used or unknown tokens get 400 INVALID_TOKEN.
 */
export async function consumeUserToken(em: EntityManager, token: string, purpose: TokenPurpose): Promise<string> {
  const row = await queryOne<{ user_id: string }>(
    em,
    `update user_tokens set used_at = now()
     where token_hash = ? and purpose = ? and used_at is null and expires_at > now()
     returning user_id`,
    [hashToken(token), purpose],
  );
  if (!row) throw invalidToken(purpose);
  return row.user_id;
}

/** What queueing an account email needs: where links point, token lifetimes, and who sends it. */
export interface TokenMail {
  publicUrl: string;
  verifyTokenTtlMinutes: number;
  resetTokenTtlMinutes: number;
  /** Hands the stored email to its workflow; called before the caller's commit. */
  start(systemEmailId: string): Promise<void>;
}

/**
 * Issues a token and writes the email that carries it, in the caller's transaction, then starts
 * its delivery. Starting before the commit means a refusal from Temporal rolls everything back;
 * the delivery activity waits for the row to become visible.
 */
export async function queueTokenEmail(
  em: EntityManager,
  mail: TokenMail,
  user: { id: string; email: string },
  purpose: TokenPurpose,
): Promise<void> {
  const ttl = purpose === 'verify-email' ? mail.verifyTokenTtlMinutes : mail.resetTokenTtlMinutes;
  const token = await issueUserToken(em, user.id, purpose, ttl);
  const content = purpose === 'verify-email' ? verificationEmail(mail.publicUrl, token, ttl) : passwordResetEmail(mail.publicUrl, token, ttl);
  await mail.start(await insertSystemEmail(em, { to: user.email, ...content }));
}
