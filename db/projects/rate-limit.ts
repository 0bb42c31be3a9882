import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../sql';

export interface RateLimitState {
  count: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

export interface Hits {
  /** A project id, or the name of another counter (`user:<id>`, `login-ip:<ip>`). */
  bucket: string;
  n: number;
}

/**
 * Counts hits in their buckets' one-minute window that holds `now` (the caller's clock, db/clock.ts),
 * in one statement, and answers each bucket's count after them. The counters live in PostgreSQL, so
 * every API process shares one count per bucket. One entry per bucket: a statement updates a row once.
 */
export async function countHits(em: EntityManager, hits: readonly Hits[], now: Date): Promise<RateLimitState[]> {
  const rows = await query<{ bucket: string; count: number; reset: string }>(
    em,
    `insert into rate_limit_windows as w (project_id, window_start, count)
     select h.bucket, date_trunc('minute', ?::timestamptz), h.n from unnest(?::text[], ?::int[]) as h(bucket, n)
     on conflict (project_id, window_start) do update set count = w.count + excluded.count
     returning w.project_id as bucket, w.count, ceil(extract(epoch from (w.window_start + interval '1 minute' - ?::timestamptz))) as reset`,
    [now, hits.map((h) => h.bucket), hits.map((h) => h.n), now],
  );
  const byBucket = new Map(rows.map((r) => [r.bucket, { count: r.count, resetSeconds: Math.max(1, Number(r.reset)) }]));
  return hits.map((h) => byBucket.get(h.bucket)!);
}

/** Counts one hit in `bucket`'s window. */
export async function hitRateLimit(em: EntityManager, bucket: string, now: Date): Promise<RateLimitState> {
  return (await countHits(em, [{ bucket, n: 1 }], now))[0]!;
}

export async function pruneRateLimitWindows(em: EntityManager): Promise<void> {
  await query(em, `delete from rate_limit_windows where window_start < now() - interval '5 minutes'`);
}
