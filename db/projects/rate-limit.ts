import type { EntityManager } from '@mikro-orm/postgresql';
import { query, queryOne } from '../sql';

export interface RateLimitState {
  count: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

/**
 * Counts one request in the bucket's one-minute window that holds `now` (the caller's clock,
 * db/clock.ts). The counter lives in Postgres, so every API process shares one count per bucket.
 * `bucket` is a project id, or the name of another counter (`user:<id>`, `login-ip:<ip>`).
 */
export async function hitRateLimit(em: EntityManager, bucket: string, now: Date): Promise<RateLimitState> {
  const row = await queryOne<{ count: number; reset: string }>(em, countHitSql('?', ''), [bucket, ...countHitParams(now)]);
  return rateLimitState(row!);
}

/**
 * The statement that counts `hits` (an SQL expression, 1 by default) for the bucket `bucket` (an
 * SQL expression, e.g. `?` or a column of `from`), returning the bucket as `project_id`, the
 * window's `count` after them and `reset`: for a caller that folds it into its own statement (the
 * API-key lookup, db/projects/projects.ts), so the hot path pays one round trip for both. Its two
 * placeholders for the time come after any in `bucket` and `from`: bind `countHitParams(now)` there.
 */
export function countHitSql(bucket: string, from: string, hits = '1'): string {
  return `insert into rate_limit_windows as w (project_id, window_start, count)
     select ${bucket}, date_trunc('minute', ?::timestamptz), ${hits} ${from}
     on conflict (project_id, window_start) do update set count = w.count + excluded.count
     returning w.project_id, w.count, ceil(extract(epoch from (w.window_start + interval '1 minute' - ?::timestamptz))) as reset`;
}

export const countHitParams = (now: Date): [Date, Date] => [now, now];

export function rateLimitState(row: { count: number; reset: string | number }): RateLimitState {
  return { count: row.count, resetSeconds: Math.max(1, Number(row.reset)) };
}

export async function pruneRateLimitWindows(em: EntityManager): Promise<void> {
  await query(em, `delete from rate_limit_windows where window_start < now() - interval '5 minutes'`);
}
