import type { EntityManager } from '@mikro-orm/postgresql';
import { query, queryOne } from '../sql';

export interface RateLimitState {
  count: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

/**
 * Counts one request in the project's current one-minute window. The counter lives in
 * Postgres and the window comes from the database clock, so every API process shares one
 * count per project and one notion of "this minute". `bucket` is a project id, or the name of
 * another counter (`user:<id>`, `login-ip:<ip>`).
 */
export async function hitRateLimit(em: EntityManager, bucket: string): Promise<RateLimitState> {
  const row = await queryOne<{ count: number; reset: string }>(em, countHitSql('?', ''), [bucket]);
  return rateLimitState(row!);
}

/**
 * The statement that counts `hits` (an SQL expression, 1 by default) for the bucket `bucket` (an
 * SQL expression, e.g. `?` or a column of `from`), returning the bucket as `project_id`, the
 * window's `count` after them and `reset`: for a caller that folds it into its own statement (the
 * API-key lookup, db/projects/projects.ts), so the hot path pays one round trip for both.
 */
export function countHitSql(bucket: string, from: string, hits = '1'): string {
  return `insert into rate_limit_windows as w (project_id, window_start, count)
     select ${bucket}, date_trunc('minute', now()), ${hits} ${from}
     on conflict (project_id, window_start) do update set count = w.count + excluded.count
     returning w.project_id, w.count, ceil(extract(epoch from (w.window_start + interval '1 minute' - now()))) as reset`;
}

export function rateLimitState(row: { count: number; reset: string | number }): RateLimitState {
  return { count: row.count, resetSeconds: Math.max(1, Number(row.reset)) };
}

export async function pruneRateLimitWindows(em: EntityManager): Promise<void> {
  await query(em, `delete from rate_limit_windows where window_start < now() - interval '5 minutes'`);
}
