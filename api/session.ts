import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Request, Response } from 'express';
import { type JWTPayload, SignJWT, errors as joseErrors, jwtVerify } from 'jose';
import type { Config } from '../config';
import { isSessionRevoked, revokeSession } from '../db/accounts/revoked-sessions';
import { findSessionUser, type SessionUser } from '../db/accounts/users';

export const SESSION_COOKIE = 'tidings_session';
const SESSION_SECONDS = 7 * 24 * 60 * 60;
const ISSUER = 'tidings';

const key = (secret: string) => new TextEncoder().encode(secret);

/**
 * The session JWT: the user, their session version (a password change bumps it, ending every
 * session) and its own id (signing out revokes that one session).
 */
export async function signSession(secret: string, user: Pick<SessionUser, 'id' | 'sessionVersion'>): Promise<string> {
  return new SignJWT({ ver: user.sessionVersion })
    .setProtectedHeader({ alg: 'HS256' })
    .setJti(randomUUID())
    .setSubject(user.id)
    .setIssuer(ISSUER)
    .setIssuedAt()
    .setExpirationTime(`${SESSION_SECONDS}s`)
    .sign(key(secret));
}

const cookieOptions = (config: Pick<Config, 'publicUrl'>) => ({
  httpOnly: true,
  sameSite: 'lax' as const,
  secure: config.publicUrl.startsWith('https:'),
  path: '/',
});

export async function setSessionCookie(res: Response, config: Pick<Config, 'publicUrl'>, secret: string, user: SessionUser) {
  res.cookie(SESSION_COOKIE, await signSession(secret, user), { ...cookieOptions(config), maxAge: SESSION_SECONDS * 1000 });
}

export function clearSessionCookie(res: Response, config: Pick<Config, 'publicUrl'>): void {
  res.clearCookie(SESSION_COOKIE, cookieOptions(config));
}

export function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

export type SessionResult = { user: SessionUser } | { error: 'missing' | 'invalid' };

/** The verified claims of the request's session cookie; null when it has none or it does not verify. */
async function sessionClaims(req: Request, secret: string): Promise<JWTPayload | 'missing' | null> {
  const token = cookieValue(req, SESSION_COOKIE);
  if (!token) return 'missing';
  try {
    return (await jwtVerify(token, key(secret), { issuer: ISSUER, algorithms: ['HS256'] })).payload;
  } catch (err) {
    if (err instanceof joseErrors.JOSEError) return null;
    throw err;
  }
}

/** The signed-in user of this request, if its cookie holds a current session. */
export async function readSession(req: Request, em: EntityManager, secret: string): Promise<SessionResult> {
  const claims = await sessionClaims(req, secret);
  if (claims === 'missing') return { error: 'missing' };
  if (!claims?.sub || !claims.jti || (await isSessionRevoked(em, claims.jti))) return { error: 'invalid' };
  const user = await findSessionUser(em, claims.sub);
  if (!user || user.sessionVersion !== claims.ver) return { error: 'invalid' };
  return { user };
}

/** Signing out: the request's session (if it verifies) stops working everywhere, not only in this browser. */
export async function revokeRequestSession(req: Request, em: EntityManager, secret: string): Promise<void> {
  const claims = await sessionClaims(req, secret);
  if (claims === 'missing' || !claims?.jti || !claims.exp) return;
  await revokeSession(em, claims.jti, new Date(claims.exp * 1000));
}
