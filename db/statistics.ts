import type { EntityManager } from '@mikro-orm/postgresql';
import { query, transaction } from './sql';

/**
 * Plans that follow the tables as they grow. The service's frequent statements are prepared
 * (db/sql.ts), and PostgreSQL keeps a prepared statement's generic plan until the statistics of a
 * table it reads change. On a new install the first generic plans are made while the tables hold a
 * few rows, so they scan whole tables and hash-join them; autovacuum's first ANALYZE can be a minute
 * or more away, and until then every claim and every write reads the whole of a growing table.
 *
 * So a table is analyzed here once it holds twice the rows it held at its last ANALYZE (and at
 * least MIN_ROWS): a fresh table is analyzed at about 1,000, 2,000, 4,000… rows, and each ANALYZE
 * makes PostgreSQL plan the statements that read it again. Only growth counts: a small table whose
 * rows change in place (rate-limit windows, throttle clocks) is left to autovacuum, and a large
 * table reaches autovacuum's own threshold (10 % of its rows changed) long before it doubles.
 */
export const MIN_ROWS = 1000;

/** How often the service looks (cli/start.ts): one read of the table statistics. */
export const STATISTICS_CHECK_MS = 2000;

/** Analyzes the tables of the current schema that have doubled (see above); returns their names. */
export async function analyzeGrownTables(em: EntityManager): Promise<string[]> {
  return transaction(em, async (tx) => {
    // Several API processes share a database: one of them analyzes at a time, the others skip the round.
    const [lock] = await query<{ got: boolean }>(tx, 'select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as got', ['tidings:analyze']);
    if (!lock?.got) return [];
    const grown = await query<{ name: string }>(
      tx,
      `select format('%I.%I', s.schemaname, s.relname) as name
       from pg_stat_user_tables s join pg_class c on c.oid = s.relid
       where s.schemaname = current_schema() and s.n_live_tup >= greatest(?, 2 * c.reltuples)
       order by s.relname`,
      [MIN_ROWS],
    );
    for (const { name } of grown) await query(tx, `analyze ${name}`);
    return grown.map((t) => t.name);
  });
}
