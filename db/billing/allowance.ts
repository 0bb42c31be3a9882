import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, validationError } from '../../errors';
import { inTransaction, query, queryOne } from '../sql';

/** What a project consumes and caps: its emails by where they came from (emails.source). */
export const BILLING_CATEGORIES = ['transactional', 'campaign', 'workflow'] as const;
export type BillingCategory = (typeof BILLING_CATEGORIES)[number];

/**
 * The `error` of an email the cap refused after the work was accepted (a campaign batch, a workflow
 * step): the row is written FAILED so the refusal is visible, and it is not counted as consumption.
 */
export const OVER_LIMIT_ERROR = 'BILLING_LIMIT_EXCEEDED';

export type BillingLimits = Record<BillingCategory, number | null>;

export interface Period {
  start: Date;
  end: Date;
}

/** The calendar month (UTC) that contains `at`; `end` is the first instant of the next month. */
export function monthContaining(at: Date): Period {
  return {
    start: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)),
    end: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1)),
  };
}

/** `YYYY-MM` → that month (UTC); 422 on anything else. */
export function parseMonth(month: string): Period {
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(month);
  if (!m) throw validationError([{ field: 'month', message: 'Must be a month as YYYY-MM, e.g. 2026-11', code: 'invalid_string' }]);
  return monthContaining(new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1)));
}

// ---- Limits ---------------------------------------------------------------------------------------

export async function getBillingLimits(em: EntityManager, projectId: string): Promise<BillingLimits> {
  const rows = await query<{ category: BillingCategory; monthly_limit: number }>(
    em,
    'select category, monthly_limit from billing_limits where project_id = ?',
    [projectId],
  );
  const limits: BillingLimits = { transactional: null, campaign: null, workflow: null };
  for (const r of rows) limits[r.category] = r.monthly_limit;
  return limits;
}

/** Sets the categories given (a number caps it, null removes its cap); the others keep theirs. Atomic. */
export async function setBillingLimits(em: EntityManager, projectId: string, changes: Partial<BillingLimits>): Promise<BillingLimits> {
  return em.transactional(async (tx) => {
    for (const category of BILLING_CATEGORIES) {
      const value = changes[category];
      if (value === undefined) continue;
      if (value === null) {
        await query(tx, 'delete from billing_limits where project_id = ? and category = ?', [projectId, category]);
      } else {
        await query(
          tx,
          `insert into billing_limits (project_id, category, monthly_limit) values (?, ?, ?)
           on conflict (project_id, category) do update set monthly_limit = excluded.monthly_limit`,
          [projectId, category, value],
        );
      }
    }
    return getBillingLimits(tx, projectId);
  });
}

// ---- Consumption ----------------------------------------------------------------------------------

/**
 * Emails that count: every row of the category created in the period, except the ones the cap
 * refused. The partial index emails_billing_usage has this very predicate: keep them the same.
 */
const COUNTED = `project_id = ? and source = ? and created_at >= ? and created_at < ? and error is distinct from '${OVER_LIMIT_ERROR}'`;

export interface Consumption {
  period: { start: string; end: string };
  categories: Record<BillingCategory, { used: number; limit: number | null; refused: number }>;
  total: number;
}

/** The `month` key of billing_carryover for a period: its first day. */
const monthKey = (period: Period) => period.start.toISOString().slice(0, 10);

/**
 * Per category: emails counted in the month (UTC), plus what a reset carried over from deleted
 * rows, the current cap, and the emails the cap refused.
 */
export async function getConsumption(em: EntityManager, projectId: string, period: Period): Promise<Consumption> {
  const rows = await query<{ source: BillingCategory; used: string; refused: string }>(
    em,
    `select source, sum(used) as used, sum(refused) as refused from (
       select source,
         count(*) filter (where error is distinct from '${OVER_LIMIT_ERROR}') as used,
         count(*) filter (where error = '${OVER_LIMIT_ERROR}') as refused
       from emails where project_id = ? and created_at >= ? and created_at < ?
       group by source
       union all
       select category, used, refused from billing_carryover where project_id = ? and month = ?::date
     ) counts group by source`,
    [projectId, period.start, period.end, projectId, monthKey(period)],
  );
  const limits = await getBillingLimits(em, projectId);
  const categories = Object.fromEntries(
    BILLING_CATEGORIES.map((c) => {
      const row = rows.find((r) => r.source === c);
      return [c, { used: Number(row?.used ?? 0), limit: limits[c], refused: Number(row?.refused ?? 0) }];
    }),
  ) as Consumption['categories'];
  return {
    period: { start: period.start.toISOString(), end: period.end.toISOString() },
    categories,
    total: BILLING_CATEGORIES.reduce((n, c) => n + categories[c].used, 0),
  };
}

/**
 * Before a project's email rows are deleted (a reset): their counts per category and month move
 * to billing_carryover, inside the caller's transaction, so consumption and the caps still see them.
 */
export async function carryOverConsumption(tx: EntityManager, projectId: string): Promise<void> {
  await query(
    tx,
    `insert into billing_carryover as c (project_id, category, month, used, refused)
     select project_id, source, date_trunc('month', created_at at time zone 'UTC')::date,
       count(*) filter (where error is distinct from '${OVER_LIMIT_ERROR}'),
       count(*) filter (where error = '${OVER_LIMIT_ERROR}')
     from emails where project_id = ?
     group by project_id, source, date_trunc('month', created_at at time zone 'UTC')::date
     on conflict (project_id, category, month) do update
       set used = c.used + excluded.used, refused = c.refused + excluded.refused`,
    [projectId],
  );
}

// ---- The cap, at every place that writes emails ---------------------------------------------------

export interface Allowance {
  limit: number | null;
  used: number;
  /** How many more emails the month allows; Infinity without a cap. */
  remaining: number;
  period: Period;
}

/**
 * How many more emails of `category` the project may write in the month containing `at` (now by
 * default). With `lock` (inside a transaction), a capped category is locked for the rest of the
 * transaction, so writers of the same project and category count and insert one after another and
 * concurrent requests cannot overshoot the cap together. An uncapped category takes no lock.
 */
export async function allowance(
  em: EntityManager,
  projectId: string,
  category: BillingCategory,
  opts: { lock: boolean; at?: Date },
): Promise<Allowance> {
  const period = monthContaining(opts.at ?? new Date());
  const capped = await queryOne<{ monthly_limit: number }>(
    em,
    'select monthly_limit from billing_limits where project_id = ? and category = ?',
    [projectId, category],
  );
  if (!capped) return { limit: null, used: 0, remaining: Infinity, period };
  if (opts.lock) {
    // Outside a transaction the lock would end with its own statement and protect nothing.
    if (!inTransaction(em)) throw new Error('allowance({ lock: true }) must run inside a transaction');
    await query(em, 'select pg_advisory_xact_lock(hashtextextended(?, 0))', [`billing:${projectId}:${category}`]);
  }
  // Read again after the lock: the cap may have changed, and the previous holder's rows are now committed.
  const row = await queryOne<{ monthly_limit: number | null; used: string }>(
    em,
    `select (select monthly_limit from billing_limits where project_id = ? and category = ?) as monthly_limit,
       (select count(*) from emails where ${COUNTED})
         + coalesce((select used from billing_carryover where project_id = ? and category = ? and month = ?::date), 0) as used`,
    [projectId, category, projectId, category, period.start, period.end, projectId, category, monthKey(period)],
  );
  const limit = row?.monthly_limit ?? null;
  const used = Number(row?.used ?? 0);
  return { limit, used, remaining: limit === null ? Infinity : Math.max(0, limit - used), period };
}

export function limitExceeded(category: BillingCategory, a: Allowance, wanted: number): AppError {
  return new AppError(
    402,
    'BILLING_LIMIT_EXCEEDED',
    `The project's monthly ${category} email cap is reached: ${a.used} of ${a.limit} used in ` +
      `${a.period.start.toISOString().slice(0, 7)} (UTC), ${a.remaining} left, and this needs ${wanted}`,
    {
      suggestion:
        `Raise or remove the ${category} cap with PUT /users/@me/projects/:id/billing-limits (OWNER or ADMIN), ` +
        `send to fewer recipients, or wait for the next month (${a.period.end.toISOString()}).`,
    },
  );
}

/**
 * Refuses with 402 BILLING_LIMIT_EXCEEDED when `count` more emails would pass the cap; nothing is
 * written then. Call it in the transaction that writes the emails, right before writing them.
 */
export async function requireAllowance(em: EntityManager, projectId: string, category: BillingCategory, count: number): Promise<void> {
  const a = await allowance(em, projectId, category, { lock: true });
  if (count > a.remaining) throw limitExceeded(category, a, count);
}

/** Emails just written that the cap does not allow: FAILED, with OVER_LIMIT_ERROR, never delivered. */
export async function refuseOverLimit(em: EntityManager, emailIds: string[]): Promise<void> {
  if (emailIds.length === 0) return;
  await query(em, `update emails set status = 'FAILED', error = ?, updated_at = now() where id = any(?::uuid[])`, [OVER_LIMIT_ERROR, emailIds]);
}

/** Whether the cap refused this email (a retried activity finds its earlier answer). */
export async function refusedOverLimit(em: EntityManager, emailId: string): Promise<boolean> {
  const row = await queryOne<{ refused: boolean }>(em, 'select error = ? as refused from emails where id = ?', [OVER_LIMIT_ERROR, emailId]);
  return row?.refused === true;
}
