import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Raw SQL for the set-based statements (upserts, counts, keyset pages) that an ORM query
 * would turn into several round trips. Bindings are positional `?` (arrays travel as arrays);
 * write the jsonb "has key" operator as `\\?`.
 *
 * A statement goes to node-postgres directly, on a connection of the ORM's pool (knex's: same
 * limits, timeouts and broken-connection checks), or on the caller's transaction: the one
 * `transaction()` below opened, or an ORM transaction (`em.transactional`), which still goes
 * through knex so that it joins knex's own bookkeeping. Measured on the hot path (/v1/send), knex
 * added ~40 µs of CPU to every statement and MikroORM's transactional() ~300 µs to every
 * transaction, more than the statements themselves.
 */
export async function query<T = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
): Promise<T[]> {
  const lean = leanTransactions.get(em);
  if (lean) return (await run<T>(lean, sql, params)).rows;
  const trx = em.getTransactionContext();
  if (trx) {
    const raw = em.getKnex().raw(sql, params as Parameters<ReturnType<EntityManager['getKnex']>['raw']>[1]);
    return ((await raw.transacting(trx)) as { rows: T[] }).rows;
  }
  const pool = poolOf(em);
  const connection = await pool.acquireConnection();
  try {
    return (await run<T>(connection, sql, params).catch((err: unknown) => {
      // Outside a transaction the statement can simply go again, under its new name.
      if (isStalePlan(err)) return run<T>(connection, sql, params);
      throw err;
    })).rows;
  } finally {
    await pool.releaseConnection(connection);
  }
}

/**
 * A value written into a statement's text instead of bound, for the few statements that must have
 * no parameters (db/messages/delivery-queue.ts claimStatement). standard_conforming_strings is
 * on (PostgreSQL's default since 9.1), so doubling the quotes is the whole escape.
 */
export const sqlText = (value: string) => `'${value.replace(/'/g, "''")}'`;

export function sqlInteger(value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`Not an integer: ${value}`);
  return String(value);
}

export async function queryOne<T = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
): Promise<T | undefined> {
  const rows = await query<T>(em, sql, params);
  return rows[0];
}

/**
 * Runs `work` in one transaction on one pooled connection, committed when it resolves and rolled
 * back when it throws. Inside, use `query()` with the entity manager it is given; ORM calls
 * (find, flush, …) on that manager throw instead of silently running outside the transaction,
 * and a nested `transaction()` or `em.transactional` is a savepoint on the same connection.
 * Within an ORM transaction already, it is `em.transactional` (a savepoint there).
 */
export async function transaction<T>(em: EntityManager, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  const lean = leanTransactions.get(em);
  if (lean) return savepoint(em, lean, work);
  if (em.isInTransaction()) return em.transactional(work);
  const pool = poolOf(em);
  const connection = await pool.acquireConnection();
  const tx = em.fork();
  tx.setTransactionContext(ORM_CALLS_REFUSED);
  // Code that opens its own ORM transaction (em.transactional) joins this one as a savepoint.
  Object.defineProperty(tx, 'transactional', { value: <R>(nested: (inner: EntityManager) => Promise<R>) => savepoint(tx, connection, nested) });
  leanTransactions.set(tx, connection);
  try {
    await connection.query('begin');
    const result = await work(tx);
    await connection.query('commit');
    return result;
  } catch (err) {
    await connection.query('rollback').catch((rollbackErr: unknown) => {
      // The connection is unusable (it broke mid-transaction): the pool must not hand it out again.
      connection.__knex__disposed = rollbackErr;
    });
    throw err;
  } finally {
    leanTransactions.delete(tx);
    await pool.releaseConnection(connection);
  }
}

let savepoints = 0;

async function savepoint<T>(tx: EntityManager, connection: PgConnection, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  const name = `tidings_sp_${++savepoints}`;
  await connection.query(`savepoint ${name}`);
  try {
    const result = await work(tx);
    await connection.query(`release savepoint ${name}`);
    return result;
  } catch (err) {
    await connection.query(`rollback to savepoint ${name}`).catch(() => undefined);
    throw err;
  }
}

/**
 * Independent reads, at once on pooled connections, or one after another in a transaction: its
 * one connection runs a statement at a time (node-postgres queues a second query on a busy
 * client, deprecated, and pg@9 refuses it).
 */
export async function together<T extends readonly unknown[]>(em: EntityManager, ...work: { [K in keyof T]: () => Promise<T[K]> }): Promise<T> {
  if (!inTransaction(em)) return (await Promise.all(work.map((w) => w()))) as unknown as T;
  const results: unknown[] = [];
  for (const w of work) results.push(await w());
  return results as unknown as T;
}

/** True inside `transaction()` or an ORM transaction: where a lock taken now lasts until the commit. */
export function inTransaction(em: EntityManager): boolean {
  return leanTransactions.has(em) || em.isInTransaction();
}

interface PgConnection {
  query<T>(config: string | StatementConfig): Promise<{ rows: T[] }>;
  /** knex's mark for a connection its pool must discard. */
  __knex__disposed?: unknown;
}

interface KnexPool {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): Promise<unknown>;
}

const poolOf = (em: EntityManager) => em.getKnex().client as unknown as KnexPool;

const leanTransactions = new WeakMap<EntityManager, PgConnection>();

/** Stands in for a knex transaction on the manager `transaction()` hands out: any ORM use of it throws. */
const ORM_CALLS_REFUSED = new Proxy(
  {},
  {
    get() {
      throw new Error('An ORM call inside db/sql.ts transaction(): use query() there, or em.transactional for ORM work');
    },
  },
);

/**
 * SQLSTATE 0A000 "cached plan must not change result type": a migration changed the columns a
 * prepared `select *` / `returning *` returns. The text is prepared again under a new name (on
 * every connection, as each one meets it), so only the statement that met it fails, and not even
 * that one outside a transaction.
 */
const isStalePlan = (err: unknown) => (err as { code?: unknown }).code === '0A000' && /cached plan/.test(String((err as Error).message));

async function run<T>(connection: PgConnection, sql: string, params: readonly unknown[]): Promise<{ rows: T[] }> {
  const { config, entry } = statement(sql, params);
  try {
    return await connection.query<T>(config);
  } catch (err) {
    if (config.name && isStalePlan(err) && entry.name === config.name) entry.name = `${config.name.replace(/_g\d+$/, '')}_g${++generations}`;
    throw err;
  }
}

let generations = 0;

interface StatementConfig {
  text: string;
  values: unknown[];
  /** A named statement: each connection parses it once, and PostgreSQL may keep a generic plan. */
  name?: string;
}

/**
 * Statements that come back are prepared (named): parsing and planning were half of
 * PostgreSQL's CPU per statement on /v1/send. A text is named once seen
 * PREPARE_AFTER times, so one-off texts (a segment's compiled condition) are not, and at most
 * MAX_PREPARED texts are, since every connection keeps what it prepared. A migration that
 * changes the columns of a `select *` is handled by isStalePlan below.
 */
const PREPARE_AFTER = 3;
const MAX_PREPARED = 400;

interface Converted {
  text: string;
  count: number;
  seen: number;
  name?: string;
}

/** `?` → `$1…` as knex does it (`\\?` stays a literal `?`); cached, as the same statements come back all the time. */
const converted = new Map<string, Converted>();
let prepared = 0;

function statement(sql: string, params: readonly unknown[]): { config: StatementConfig; entry: Converted } {
  let found = converted.get(sql);
  if (!found) {
    let count = 0;
    const text = sql.replace(/\\?\?\??/g, (match) => {
      if (match === '\\?') return '?';
      if (match === '??') throw new Error('db/sql.ts: `??` (a knex identifier binding) is not supported');
      return `$${++count}`;
    });
    found = { text, count, seen: 0 };
    // Named texts stay: a connection that prepared one must get the same name for the same text.
    if (converted.size >= 4_000) for (const [k, v] of converted) if (!v.name) converted.delete(k);
    converted.set(sql, found);
  }
  if (found.count !== params.length) throw new Error(`Expected ${found.count} bindings, saw ${params.length}`);
  for (let i = 0; i < params.length; i++) {
    if (params[i] === undefined) throw new Error(`Undefined binding at position ${i + 1} in: ${sql}`);
  }
  if (!found.name && ++found.seen >= PREPARE_AFTER && prepared < MAX_PREPARED) {
    found.name = `tidings_${createHash('sha1').update(found.text).digest('hex').slice(0, 20)}`;
    prepared++;
  }
  return { config: { text: found.text, values: params as unknown[], ...(found.name ? { name: found.name } : {}) }, entry: found };
}
