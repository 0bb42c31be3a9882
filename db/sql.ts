import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Raw SQL for the set-based statements (upserts, counts, keyset pages) that an ORM query
 * would turn into several round trips. Goes through knex so values travel as real
 * parameters ($1…, arrays as arrays) and joins the entity manager's transaction if any.
 * Bindings are positional `?`; write the jsonb "has key" operator as `\\?`.
 */
export async function query<T = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
): Promise<T[]> {
  const raw = em.getKnex().raw(sql, params as Parameters<ReturnType<EntityManager["getKnex"]>["raw"]>[1]);
  const trx = em.getTransactionContext();
  if (trx) raw.transacting(trx);
  const result = (await raw) as { rows: T[] };
  return result.rows;
}

export async function queryOne<T = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
): Promise<T | undefined> {
  const rows = await query<T>(em, sql, params);
  return rows[0];
}
