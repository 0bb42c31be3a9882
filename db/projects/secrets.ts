import { createHmac, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { queryOne } from '../sql';

/**
 * An instance-wide secret, generated once and shared by every process through the database,
 * for deployments that did not configure one.
 */
export async function instanceSecret(em: EntityManager, name: string): Promise<string> {
  const row = await queryOne<{ value: string }>(
    em,
    `with created as (
       insert into app_secrets (name, value) values (?, ?) on conflict (name) do nothing returning value
     )
     select value from created union all select value from app_secrets where name = ? limit 1`,
    [name, randomBytes(32).toString('hex'), name],
  );
  if (row) return row.value;
  // Another process inserted it concurrently: the insert waited for its commit, but this
  // statement's snapshot predates it. A new statement sees it.
  const existing = await queryOne<{ value: string }>(em, 'select value from app_secrets where name = ?', [name]);
  return existing!.value;
}

/** Key for signing contact links: derived from JWT_SECRET when configured, else generated once. */
export async function linkSigningSecret(em: EntityManager, jwtSecret: string | undefined): Promise<string> {
  if (jwtSecret) return createHmac('sha256', jwtSecret).update('tidings:contact-links').digest('hex');
  return instanceSecret(em, 'contact-links');
}

/** Key for session JWTs: derived from JWT_SECRET when configured, else generated once. */
export async function sessionSigningSecret(em: EntityManager, jwtSecret: string | undefined): Promise<string> {
  if (jwtSecret) return createHmac('sha256', jwtSecret).update('tidings:sessions').digest('hex');
  return instanceSecret(em, 'sessions');
}

/** Key for signing bounce addresses (mail/inbound/bounce-address.ts): derived from JWT_SECRET when configured, else generated once. */
export async function bounceSigningSecret(em: EntityManager, jwtSecret: string | undefined): Promise<string> {
  if (jwtSecret) return createHmac('sha256', jwtSecret).update('tidings:bounce-addresses').digest('hex');
  return instanceSecret(em, 'bounce-addresses');
}
