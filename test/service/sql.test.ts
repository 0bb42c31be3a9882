import { query, queryOne, together, transaction, inTransaction } from '../../db/sql';
import { ProjectSchema } from '../../db/entities/project';
import { startTestEnv, type TestEnv } from '../helpers/env';

// db/sql.ts: statements on node-postgres directly, prepared once they come back, and the lean
// transaction() the hot paths use instead of MikroORM's.

let env: TestEnv;
const table = `sql_test_${process.pid}`;

beforeAll(async () => {
  env = await startTestEnv();
  await query(env.orm.em.fork(), `create table ${table} (id int primary key, note text)`);
});
afterAll(async () => {
  await query(env.orm.em.fork(), `drop table if exists ${table}`);
  await env.close();
});

const em = () => env.orm.em.fork();
const count = async () => Number((await queryOne<{ n: string }>(em(), `select count(*) as n from ${table}`))!.n);

test('positional bindings, arrays as arrays, `\\?` as the jsonb operator, and refused bindings', async () => {
  const row = await queryOne<{ a: number; b: number[]; has: boolean }>(em(), "select ?::int as a, ?::int[] as b, ?::jsonb \\? 'k' as has", [
    7,
    [1, 2],
    JSON.stringify({ k: 1 }),
  ]);
  expect(row).toEqual({ a: 7, b: [1, 2], has: true });
  await expect(query(em(), 'select ?::int as a', [undefined])).rejects.toThrow(/Undefined binding/);
  await expect(query(em(), 'select ?::int as a, ?::int as b', [1])).rejects.toThrow(/Expected 2 bindings, saw 1/);
});

test('a statement run many times (prepared after a few) keeps returning its own parameters', async () => {
  for (let i = 0; i < 12; i++) {
    const row = await queryOne<{ v: string; w: number }>(em(), 'select ?::text as v, ?::int * 2 as w', [`run ${i}`, i]);
    expect(row).toEqual({ v: `run ${i}`, w: i * 2 });
  }
});

test('a migration that changes what a prepared `select *` returns: the next statement prepares it again', async () => {
  const t = `${table}_stale`;
  await query(em(), `create table ${t} (a int)`);
  await query(em(), `insert into ${t} values (1)`);
  const read = (m = em()) => query<Record<string, unknown>>(m, `select * from ${t}`);
  // The pool has several connections: make the text prepared, then used on more than one of them.
  await Promise.all(Array.from({ length: 8 }, () => read()));
  await Promise.all(Array.from({ length: 8 }, () => read()));
  await query(em(), `alter table ${t} add column b int default 2`);
  // Outside a transaction the statement goes again under a new name.
  const rows = await Promise.all(Array.from({ length: 8 }, () => read()));
  for (const r of rows) expect(r).toEqual([{ a: 1, b: 2 }]);
  // Inside one, at most the first attempt fails (the transaction is aborted); the next one works.
  await query(em(), `alter table ${t} add column c int default 3`);
  const inTx = async () => transaction(em(), (tx) => read(tx));
  const first = await inTx().catch((err: Error) => err);
  if (first instanceof Error) expect(first.message).toMatch(/cached plan/);
  expect(await inTx()).toEqual([{ a: 1, b: 2, c: 3 }]);
  await query(em(), `drop table ${t}`);
});

test('transaction(): committed when the work resolves, rolled back when it throws', async () => {
  await transaction(em(), async (tx) => {
    expect(inTransaction(tx)).toBe(true);
    await query(tx, `insert into ${table} values (1, 'kept')`);
  });
  await expect(
    transaction(em(), async (tx) => {
      await query(tx, `insert into ${table} values (2, 'gone')`);
      throw new Error('boom');
    }),
  ).rejects.toThrow('boom');
  const rows = await query<{ id: number }>(em(), `select id from ${table} order by id`);
  expect(rows.map((r) => r.id)).toEqual([1]);
});

test('transaction(): its statements are invisible to others until the commit, and run on one connection', async () => {
  let seenInside = -1;
  await transaction(em(), async (tx) => {
    await query(tx, `insert into ${table} values (10, 'pending')`);
    const pid = () => () => queryOne<{ pid: number }>(tx, 'select pg_backend_pid() as pid');
    const pids = await together(tx, pid(), pid(), pid(), pid());
    expect(new Set(pids.map((p) => p!.pid)).size).toBe(1);
    seenInside = Number((await queryOne<{ n: string }>(em(), `select count(*) as n from ${table} where id = 10`))!.n);
  });
  expect(seenInside).toBe(0);
  expect(await count()).toBe(2);
});

test('transaction(): a nested transaction or em.transactional is a savepoint; an ORM call inside throws', async () => {
  await transaction(em(), async (tx) => {
    await query(tx, `insert into ${table} values (20, 'outer')`);
    await expect(
      tx.transactional(async (inner) => {
        await query(inner, `insert into ${table} values (21, 'inner, rolled back')`);
        throw new Error('inner fails');
      }),
    ).rejects.toThrow('inner fails');
    await transaction(tx, (inner) => query(inner, `insert into ${table} values (22, 'inner, kept')`));
    await expect(tx.findOne(ProjectSchema, { id: 'nope' })).rejects.toThrow(/ORM call inside db\/sql.ts transaction/);
  });
  const ids = (await query<{ id: number }>(em(), `select id from ${table} where id >= 20 order by id`)).map((r) => r.id);
  expect(ids).toEqual([20, 22]);
});

test('transaction(): a connection lost mid-transaction is an error, and the pool goes on with good connections', async () => {
  await expect(
    transaction(em(), async (tx) => {
      await query(tx, `insert into ${table} values (30, 'lost')`);
      await query(tx, 'select pg_terminate_backend(pg_backend_pid())');
    }),
  ).rejects.toThrow();
  for (let i = 0; i < 30; i++) expect(await queryOne(em(), 'select 1 as one')).toEqual({ one: 1 });
  expect(await queryOne(em(), `select id from ${table} where id = 30`)).toBeUndefined();
});

test('together(): independent reads at once on the pool, one after another on a transaction’s one connection', async () => {
  const run = async (on: Parameters<typeof query>[0]) => {
    const order: string[] = [];
    const read = (name: string) => async () => {
      order.push(`${name} start`);
      await query(on, 'select 1');
      order.push(`${name} end`);
      return name;
    };
    expect(await together(on, read('a'), read('b'))).toEqual(['a', 'b']);
    return order;
  };
  // On the pool the second starts before the first ends (either may end first).
  expect((await run(em())).slice(0, 2)).toEqual(['a start', 'b start']);
  expect(await transaction(em(), (tx) => run(tx))).toEqual(['a start', 'a end', 'b start', 'b end']);
  expect(await env.orm.em.fork().transactional((tx) => run(tx))).toEqual(['a start', 'a end', 'b start', 'b end']);
});
