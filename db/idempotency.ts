import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../errors';
import { query, queryOne } from './sql';

export interface StoredResponse {
  status: number;
  body: unknown;
}

const KEEP = "interval '24 hours'";

/** Stable hash of a JSON body: key order does not make two equal requests differ. */
function hashBody(body: unknown): string {
  const canonical = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canonical)
      : v && typeof v === 'object'
        ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k])]))
        : v;
  return createHash('sha256').update(JSON.stringify(canonical(body))).digest('hex');
}

/**
 * Runs `work` in a transaction, once per (project, scope, key) within 24 h. The key is claimed
 * (committed) before the work starts, so two concurrent requests with one key cannot both run;
 * the response is stored in the work's own transaction, so it exists exactly when the work took
 * effect. A repeat with the same body replays it, a different body is a 409. Failed work
 * releases the key.
 */
export async function idempotent(
  em: EntityManager,
  projectId: string,
  scope: string,
  key: string | undefined,
  body: unknown,
  work: (tx: EntityManager) => Promise<StoredResponse>,
): Promise<StoredResponse & { replayed: boolean }> {
  if (key === undefined) return { ...(await em.transactional(work)), replayed: false };
  const hash = hashBody(body);
  // An expired claim is taken over as if it did not exist.
  const claimed = await queryOne(
    em,
    `insert into idempotency_keys as k (project_id, scope, key, request_hash) values (?, ?, ?, ?)
     on conflict (project_id, scope, key) do update
       set request_hash = excluded.request_hash, response_status = null, response_body = null, created_at = now()
       where k.created_at < now() - ${KEEP}
     returning 1 as claimed`,
    [projectId, scope, key, hash],
  );
  if (!claimed) {
    const existing = await queryOne<{ request_hash: string; response_status: number | null; response_body: unknown }>(
      em,
      'select request_hash, response_status, response_body from idempotency_keys where project_id = ? and scope = ? and key = ?',
      [projectId, scope, key],
    );
    if (existing && existing.request_hash !== hash) {
      throw new AppError(409, 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request body', {
        suggestion: 'Use a new Idempotency-Key for a different request.',
      });
    }
    if (existing?.response_status == null) {
      throw new AppError(409, 'IDEMPOTENCY_KEY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed', {
        suggestion: 'Retry in a moment to get its response.',
      });
    }
    return { status: existing.response_status, body: existing.response_body, replayed: true };
  }
  try {
    const response = await em.transactional(async (tx) => {
      const done = await work(tx);
      await query(
        tx,
        'update idempotency_keys set response_status = ?, response_body = ?::jsonb where project_id = ? and scope = ? and key = ?',
        [done.status, JSON.stringify(done.body), projectId, scope, key],
      );
      return done;
    });
    return { ...response, replayed: false };
  } catch (err) {
    await query(em, 'delete from idempotency_keys where project_id = ? and scope = ? and key = ?', [projectId, scope, key]);
    throw err;
  }
}

/** Releases a key whose request must be allowed to run again. */
export async function forgetIdempotencyKey(em: EntityManager, projectId: string, scope: string, key: string | undefined): Promise<void> {
  if (key === undefined) return;
  await query(em, 'delete from idempotency_keys where project_id = ? and scope = ? and key = ?', [projectId, scope, key]);
}
