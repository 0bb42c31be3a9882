import type { EntityManager } from '@mikro-orm/postgresql';
import { query, transaction } from './sql';

/**
 * Plans that follow the tables as they grow. The service's frequent statements are prepared
 * (db/sql.ts), and PostgreSQL keeps a prepared statement's generic plan until the statistics of a
 * table it reads change. On a new install the first generic plans are made while the tables hold a
 * few rows, so they scan whole tables, hash-join them, or take any index that starts with the
 * right column (`contacts_project_created` to find a contact by its email); autovacuum's first
 * ANALYZE can be a minute or more away, and until then every claim and every write reads more of a
 * growing table.
 *
 * So a table is analyzed here once it holds twice the rows it held at its last ANALYZE (and at
 * least MIN_ROWS): a fresh table is analyzed at about 100, 200, 400… rows, and each ANALYZE makes
 * PostgreSQL plan the statements that read it again. Only growth counts: a small table whose rows
 * change in place (rate-limit windows, throttle clocks) is left to autovacuum, and a large table
 * reaches autovacuum's own threshold (10 % of its rows changed) long before it doubles.
 */
export const MIN_ROWS = 100;

/**
 * How often the service looks (cli/start.ts). A load writes thousands of rows a second, and the
 * row counts reach this check within about a second of the commits (when each backend flushes its
 * statistics): looking every 2 s left a new install's first seconds on the empty tables' plans,
 * where /v1/track ran at 0.78 × a warm database's rate (docs/performance.md).
 */
export const STATISTICS_CHECK_MS = 250;

/** Analyzes the tables of the current schema that have doubled (see above); returns their names. */
export async function analyzeGrownTables(em: EntityManager): Promise<string[]> {
  // The common case, nothing grew, is one statement outside a transaction.
  if ((await grownTables(em)).length === 0) return [];
  return transaction(em, async (tx) => {
    // Several API processes share a database: one of them analyzes at a time, the others skip the round.
    const [lock] = await query<{ got: boolean }>(tx, 'select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as got', ['tidings:analyze']);
    if (!lock?.got) return [];
    const grown = await grownTables(tx);
    for (const name of grown) await query(tx, `analyze ${name}`);
    return grown;
  });
}

async function grownTables(em: EntityManager): Promise<string[]> {
  const rows = await query<{ name: string }>(
    em,
    `select format('%I.%I', s.schemaname, s.relname) as name
     from pg_stat_user_tables s join pg_class c on c.oid = s.relid
     where s.schemaname = current_schema() and s.n_live_tup >= greatest(?, 2 * c.reltuples)
     order by s.relname`,
    [MIN_ROWS],
  );
  return rows.map((r) => r.name);
}
