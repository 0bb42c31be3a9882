import type { EntityManager } from '@mikro-orm/postgresql';
import type { Request, Response } from 'express';
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose';
import type { Config } from '../config';
import { findSessionUser, type SessionUser } from '../db/users';

export const SESSION_COOKIE = 'tidings_session';
const SESSION_SECONDS = 7 * 24 * 60 * 60;
const ISSUER = 'tidings';

const key = (secret: string) => new TextEncoder().encode(secret);

/** The session JWT: the user and their session version (a password change bumps it). */
export async function signSession(secret: string, user: Pick<SessionUser, 'id' | 'sessionVersion'>): Promise<string> {
  return new SignJWT({ ver: user.sessionVersion })
    .setProtectedHeader({ alg: 'HS256' })
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

function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

export type SessionResult = { user: SessionUser } | { error: 'missing' | 'invalid' };

/** The signed-in user of this request, if its cookie holds a current session. */
export async function readSession(req: Request, em: EntityManager, secret: string): Promise<SessionResult> {
  const token = cookieValue(req, SESSION_COOKIE);
  if (!token) return { error: 'missing' };
  try {
    const { payload } = await jwtVerify(token, key(secret), { issuer: ISSUER, algorithms: ['HS256'] });
    const user = payload.sub ? await findSessionUser(em, payload.sub) : null;
    if (!user || user.sessionVersion !== payload.ver) return { error: 'invalid' };
    return { user };
  } catch (err) {
    if (err instanceof joseErrors.JOSEError) return { error: 'invalid' };
    throw err;
  }
}
