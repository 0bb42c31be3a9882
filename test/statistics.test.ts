import { Client } from 'pg';
import { createOrm, type Orm } from '../db/orm';
import { analyzeGrownTables, MIN_ROWS } from '../db/statistics';

/**
 * db/statistics.ts on a database of its own, as a new install meets it: a prepared statement's plan
 * made while a table was nearly empty stays as the table grows, until the table is analyzed.
 * Autovacuum is off for the table, so only the code under test analyzes it.
 */

const dbName = `tidings_statistics_${Date.now()}_${process.pid}`;
const adminUrl = new URL(process.env.TEST_DATABASE_URL!);
adminUrl.pathname = '/postgres';
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;

let orm: Orm;
let session: Client;

beforeAll(async () => {
  const admin = new Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  orm = await createOrm(dbUrl.toString());
  session = new Client({ connectionString: dbUrl.toString() });
  await session.connect();
  await session.query(`create table items (id int primary key, payload text) with (autovacuum_enabled = false)`);
  await session.query(`insert into items select g, repeat('x', 600) from generate_series(1, 10) g`);
  // The shape of the service's batched statements: a parameter array joined to a table by its key.
  await session.query(`prepare by_ids(int[]) as select i.payload from items i join (select * from unnest($1) as u(id)) u on i.id = u.id`);
  // Five runs with custom plans, then PostgreSQL settles on a generic plan, made for 10 rows.
  for (let i = 0; i < 6; i++) await session.query(`execute by_ids('{1,2}')`);
}, 60_000);

afterAll(async () => {
  await session?.end();
  await orm?.close();
  const admin = new Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
});

const plan = async () => (await session.query<{ 'QUERY PLAN': string }>(`explain execute by_ids('{1,2}')`)).rows.map((r) => r['QUERY PLAN']).join('\n');
const grow = (from: number, to: number) => session.query(`insert into items select g, repeat('x', 600) from generate_series($1::int, $2::int) g`, [from, to]);
/** The cumulative statistics reach other sessions when a backend flushes them (within about a second). */
async function liveRows(): Promise<number> {
  await session.query('select pg_stat_force_next_flush()');
  const { rows } = await session.query<{ n: string }>(`select n_live_tup as n from pg_stat_user_tables where relname = 'items'`);
  return Number(rows[0]!.n);
}

test('a table is analyzed once it has doubled, so its statements are planned again', async () => {
  expect(await analyzeGrownTables(orm.em.fork())).toEqual([]);

  await grow(11, 5000);
  expect(await liveRows()).toBeGreaterThanOrEqual(MIN_ROWS);
  // Without an ANALYZE the plan made at 10 rows stays: every execution reads the whole table.
  expect(await plan()).toMatch(/Seq Scan on items/);

  expect(await analyzeGrownTables(orm.em.fork())).toEqual(['public.items']);
  expect(await plan()).toMatch(/Index Scan using items_pkey/);
  expect(await analyzeGrownTables(orm.em.fork())).toEqual([]);

  // Rows changed in place are autovacuum's business; growth short of double waits for more.
  await session.query(`update items set payload = repeat('y', 600)`);
  await grow(5001, 7000);
  expect(await liveRows()).toBe(7000);
  expect(await analyzeGrownTables(orm.em.fork())).toEqual([]);
  await grow(7001, 10000);
  await liveRows();
  expect(await analyzeGrownTables(orm.em.fork())).toEqual(['public.items']);
});
