import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { query, queryOne } from '../sql';

/**
 * The per-project sending throttle: at most `rate` emails per second for the whole project, however
 * many workers and campaigns send at once.
 *
 * A project's own rate covers every email it sends: campaigns (reserveSendSlots), the delivery
 * engine's claims (db/messages/delivery-queue.ts, which reserve the slots of what they take in the
 * claim's own statement), and retries (takeSendSlot). SEND_THROTTLE_PER_SECOND is the rate of
 * campaigns of projects without one; their other mail is not throttled, and costs the engine a
 * left join on this small table per claim.
 *
 * It is a reservation clock in Postgres (one row per project in `send_throttles`): a sender reserves
 * `n` slots, which moves the project's `next_at` on by n / rate seconds, and waits until the first
 * of its slots (the old `next_at`, or now if that is past) before sending them. Every worker updates
 * the same row, so the rate holds across processes; reservations are short single-row updates.
 * Idle time is not banked: after a pause the clock restarts from now, so there is no burst beyond
 * one reservation. The rate is `send_throttles.rate_per_second` when set (a per-project override),
 * else SEND_THROTTLE_PER_SECOND.
 */

export interface Reservation {
  /** Milliseconds to wait before sending the reserved emails (0: at once). */
  waitMs: number;
}

export async function throttleRate(em: EntityManager, projectId: string, defaultRate: number): Promise<number> {
  const row = await queryOne<{ rate: number | null }>(em, 'select rate_per_second as rate from send_throttles where project_id = ?', [
    projectId,
  ]);
  return row?.rate ?? defaultRate;
}

/** Sets (or with null clears) the project's own rate, which then holds for all its mail. */
export async function setThrottleRate(em: EntityManager, projectId: string, rate: number | null): Promise<void> {
  const set = await queryOne(
    em,
    `insert into send_throttles (project_id, rate_per_second) select id, ?::float8 from projects where id = ?
     on conflict (project_id) do update set rate_per_second = excluded.rate_per_second
     returning 1 as ok`,
    [rate, projectId],
  );
  if (!set) throw notFound('project');
}

/**
 * Reserves `n` send slots. `extraSql` (a scalar subquery with its params) rides along in the same
 * round trip; the campaign sender reads its campaign's status with it.
 */
export async function reserveSendSlots<T = never>(
  em: EntityManager,
  projectId: string,
  n: number,
  defaultRate: number,
  extra?: { sql: string; params: unknown[] },
): Promise<Reservation & { extra: T | undefined }> {
  const rate = 'coalesce(t.rate_per_second, ?::float8)';
  const row = await queryOne<{ wait: number; extra: T | undefined }>(
    em,
    `insert into send_throttles as t (project_id, next_at)
       values (?, clock_timestamp() + make_interval(secs => ?::float8 / ?::float8))
     on conflict (project_id) do update
       set next_at = greatest(t.next_at, clock_timestamp()) + make_interval(secs => ?::float8 / ${rate})
     returning extract(epoch from (t.next_at - clock_timestamp())) - ?::float8 / ${rate} as wait,
       ${extra ? `(${extra.sql})` : 'null'} as extra`,
    [projectId, n, defaultRate, n, defaultRate, n, defaultRate, ...(extra?.params ?? [])],
  );
  return { waitMs: Math.max(0, Math.ceil(Number(row!.wait) * 1000)), extra: row!.extra ?? undefined };
}

/** Gives back slots reserved but not used (a batch that stopped early), so the rate is not undercut. */
export async function releaseSendSlots(em: EntityManager, projectId: string, n: number, defaultRate: number): Promise<void> {
  if (n <= 0) return;
  await query(
    em,
    `update send_throttles t set next_at = t.next_at - make_interval(secs => ?::float8 / coalesce(t.rate_per_second, ?::float8))
     where t.project_id = ?`,
    [n, defaultRate, projectId],
  );
}

/**
 * One slot for a single email (a retry) of a project with its own rate, if its clock has one free
 * now: 0, the slot is taken (or the project has no rate of its own); otherwise the milliseconds
 * until one is, and nothing is taken.
 */
export async function takeSendSlot(em: EntityManager, projectId: string): Promise<number> {
  const row = await queryOne<{ taken: boolean; wait: number }>(
    em,
    `with t as (select * from send_throttles where project_id = ? and rate_per_second is not null for update),
     taken as (
       update send_throttles s set next_at = greatest(t.next_at, clock_timestamp()) + make_interval(secs => 1 / t.rate_per_second)
       from t where s.project_id = t.project_id and t.next_at <= clock_timestamp()
       returning 1
     )
     select exists (select 1 from taken) as taken, extract(epoch from (select next_at from t) - clock_timestamp()) * 1000 as wait`,
    [projectId],
  );
  return !row || row.taken || row.wait === null ? 0 : Math.max(1, Math.ceil(Number(row.wait)));
}
