import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../../errors';
import { query, queryOne, transaction } from '../sql';

export interface StoredResponse {
  status: number;
  body: unknown;
}

const KEEP = "interval '24 hours'";
/**
 * How long a request waits for another one holding its key to commit or roll back. Bounded, as
 * the waiter holds a pooled connection; longer than such work takes, so a client retrying
 * eagerly gets the first answer rather than a 409.
 */
export const IDEMPOTENCY_WAIT_MS = 5_000;
/** SQLSTATE lock_not_available: the wait above ran out. */
const LOCK_NOT_AVAILABLE = '55P03';

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

const inProgress = () =>
  new AppError(409, 'IDEMPOTENCY_KEY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed', {
    suggestion: 'Retry in a moment to get its response.',
  });

/**
 * Runs `work` in a transaction, once per (project, scope, key) within 24 h. The key is claimed by
 * the transaction's first statement and its response stored by its last, so a key exists exactly
 * when the work took effect: a crash or a failure anywhere rolls both back and the next request
 * with the key runs. A concurrent request with the same key waits on the unique index until the
 * first one commits (it then replays the stored response) or rolls back (it then runs); past
 * IDEMPOTENCY_WAIT_MS it is a 409 IDEMPOTENCY_KEY_IN_PROGRESS. A repeat with another body is a 409
 * IDEMPOTENCY_KEY_REUSED.
 */
export async function idempotent(
  em: EntityManager,
  projectId: string,
  scope: string,
  key: string | undefined,
  body: unknown,
  work: (tx: EntityManager) => Promise<StoredResponse>,
): Promise<StoredResponse & { replayed: boolean }> {
  if (key === undefined) return { ...(await transaction(em, work)), replayed: false };
  const hash = hashBody(body);
  return transaction(em, async (tx) => {
    await query(tx, `set local lock_timeout = ${IDEMPOTENCY_WAIT_MS}`);
    // An expired key is taken over as if it did not exist, and so is one without a response: only
    // the claim-then-work scheme this replaced could commit one, for work that never committed.
    const claimed = await queryOne(
      tx,
      `insert into idempotency_keys as k (project_id, scope, key, request_hash) values (?, ?, ?, ?)
       on conflict (project_id, scope, key) do update
         set request_hash = excluded.request_hash, response_status = null, response_body = null, created_at = now()
         where k.created_at < now() - ${KEEP} or k.response_status is null
       returning 1 as claimed`,
      [projectId, scope, key, hash],
    ).catch((err: unknown) => {
      throw (err as { code?: unknown }).code === LOCK_NOT_AVAILABLE ? inProgress() : err;
    });
    if (!claimed) return { ...(await storedResponse(tx, projectId, scope, key, hash)), replayed: true };
    // The work may wait on locks of its own (a contact another request is upserting) for as long as it takes.
    await query(tx, 'set local lock_timeout to default');
    const done = await work(tx);
    await query(
      tx,
      'update idempotency_keys set response_status = ?, response_body = ?::jsonb where project_id = ? and scope = ? and key = ?',
      [done.status, JSON.stringify(done.body), projectId, scope, key],
    );
    return { ...done, replayed: false };
  });
}

/** The committed response of the request that holds the key (the claim waited for its commit). */
async function storedResponse(tx: EntityManager, projectId: string, scope: string, key: string, hash: string): Promise<StoredResponse> {
  const existing = await queryOne<{ request_hash: string; response_status: number | null; response_body: unknown }>(
    tx,
    'select request_hash, response_status, response_body from idempotency_keys where project_id = ? and scope = ? and key = ?',
    [projectId, scope, key],
  );
  if (existing && existing.request_hash !== hash) {
    throw new AppError(409, 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request body', {
      suggestion: 'Use a new Idempotency-Key for a different request.',
    });
  }
  // Not expected: the claim above takes over a row without a response.
  if (existing?.response_status == null) throw inProgress();
  return { status: existing.response_status, body: existing.response_body };
}
