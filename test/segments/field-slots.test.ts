import { Client } from 'pg';
import { loadCompileContext } from '../../db/conditions/compile-context';
import type { Condition } from '../../db/conditions/grammar';
import { compileCondition } from '../../db/conditions/sql';
import { ensureSlotIndex, numberKey, prepareFieldSlots, waitForEarlierContactWriters } from '../../db/conditions/field-slots';
import { unregisterField } from '../../db/contacts/fields';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { createSegment, refreshSegmentCount } from '../../db/segments/segments';
import { query, queryOne, transaction } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { waitUntil } from '../helpers/sending';

/**
 * Typed slot columns (db/conditions/field-slots.ts): which fields get one, that the trigger keeps them
 * in step with `data`, that a slot another field had is rewritten before it is used, that the
 * back-fill waits for writers that could not see a new mapping, and that the API asks for slots
 * through the prepareFieldSlots workflow. That slot-compiled filters agree with the evaluator on
 * every value shape is in test/conditions/sql.test.ts.
 */

let env: TestEnv;
const em = () => env.orm.em.fork();

beforeAll(async () => {
  env = await startTestEnv();
  await env.startWorker();
});

afterAll(() => env.close());

async function contact(project: ProjectWithKeys, email: string, data: Record<string, unknown>, subscribed = true): Promise<string> {
  const res = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email, data, subscribed });
  expect([200, 201]).toContain(res.status);
  return res.body.id as string;
}

const slotsOf = (projectId: string) =>
  query<{ slot: string; key: string; ready: boolean; has_list: boolean }>(
    em(),
    'select slot, key, ready, has_list from contact_field_slots where project_id = ? order by slot',
    [projectId],
  );

async function countOf(projectId: string, condition: Condition): Promise<{ count: number; sql: string }> {
  const ctx = await loadCompileContext(em(), projectId, [condition]);
  const compiled = compileCondition(condition, ctx);
  const row = await queryOne<{ n: number }>(em(), `select count(*)::int as n from contacts c where c.project_id = ? and (${compiled.sql})`, [
    projectId,
    ...compiled.params,
  ]);
  return { count: row!.n, sql: compiled.sql };
}

/** The project's prepareFieldSlots run: segment writes ask for it without waiting, so it may not exist yet. */
async function slotWorkflowResult(projectId: string): Promise<unknown> {
  const handle = env.temporal.client.workflow.getHandle(`field-slots:${projectId}`);
  await waitUntil(() => handle.describe().then(() => true, () => false));
  return handle.result();
}

const segment = (projectId: string, name: string, condition: Condition) => createSegment(em(), projectId, { name, type: 'DYNAMIC', condition });

test('the fields segments name get a slot of their type; the trigger keeps it in step; a list turns equality back to the JSON', async () => {
  const project = await env.project('slots in step');
  await contact(project, 'a@example.com', { plan: 'Pro', age: 41, seen: '2025-06-01T10:00:00Z', nick: 'x', flag: true });
  await contact(project, 'b@example.com', { plan: 'free', age: '29', seen: '2025-06-01' });
  await contact(project, 'c@example.com', { plan: 'pro', age: 30.5 });
  await segment(project.id, 'pro', { field: 'data.plan', operator: 'equals', value: 'pro' });
  await segment(project.id, 'older', { field: 'data.age', operator: 'greaterThan', value: 30 });
  await segment(project.id, 'seen', { field: 'data.seen', operator: 'within', value: 100_000, unit: 'days' });
  await segment(project.id, 'flag and nested', {
    logic: 'AND',
    groups: [{ filters: [{ field: 'data.flag', operator: 'equals', value: true }, { field: 'data.plan.inner', operator: 'exists' }] }],
  });

  const pro: Condition = { field: 'data.plan', operator: 'equals', value: 'pro' };
  const older: Condition = { field: 'data.age', operator: 'greaterThan', value: 30 };
  const seen: Condition = { field: 'data.seen', operator: 'within', value: 100_000, unit: 'days' };
  const before = { pro: await countOf(project.id, pro), older: await countOf(project.id, older), seen: await countOf(project.id, seen) };
  expect(before.pro.sql).not.toContain('slot_');

  const { prepared } = await prepareFieldSlots(em(), project.id);
  // A boolean and a nested path get none; one slot per field, of the field's type.
  expect(prepared.sort()).toEqual(['age → n1', 'plan → t1', 'seen → d1']);
  expect(await slotsOf(project.id)).toEqual([
    { slot: 'd1', key: 'seen', ready: true, has_list: false },
    { slot: 'n1', key: 'age', ready: true, has_list: false },
    { slot: 't1', key: 'plan', ready: true, has_list: false },
  ]);
  expect(await prepareFieldSlots(em(), project.id)).toEqual({ prepared: [] });
  // The slots' indexes exist once some project uses the slot, and are valid.
  const indexes = await query<{ name: string; valid: boolean }>(
    em(),
    `select c.relname as name, i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid
     where c.relname in ('contacts_slot_t1', 'contacts_slot_n1', 'contacts_slot_d1') order by 1`,
  );
  expect(indexes).toEqual([
    { name: 'contacts_slot_d1', valid: true },
    { name: 'contacts_slot_n1', valid: true },
    { name: 'contacts_slot_t1', valid: true },
  ]);

  const after = { pro: await countOf(project.id, pro), older: await countOf(project.id, older), seen: await countOf(project.id, seen) };
  expect(after.pro.sql).toContain('c.slot_t1 =');
  expect(after.older.sql).toContain('c.slot_n1 >');
  expect(after.seen.sql).toContain('c.slot_d1 >=');
  expect([after.pro.count, after.older.count, after.seen.count]).toEqual([before.pro.count, before.older.count, before.seen.count]);
  // a, c | a, c (30.5) | a only: a date-only value is no date-time for within.
  expect([after.pro.count, after.older.count, after.seen.count]).toEqual([2, 2, 1]);

  // Writes after: an update, a new contact, a removed key.
  await contact(project, 'b@example.com', { plan: 'PRO', age: 31, seen: '2025-06-02T00:00:00+02:00' });
  await contact(project, 'd@example.com', { plan: 'Pro ', age: '  40 ' });
  await contact(project, 'c@example.com', { plan: null });
  expect((await countOf(project.id, pro)).count).toBe(2); // a, b
  expect((await countOf(project.id, older)).count).toBe(4); // a, b, c, d
  expect((await countOf(project.id, seen)).count).toBe(2); // a, b

  // A list: equality matches it by element, which the slot cannot say.
  await contact(project, 'e@example.com', { plan: ['starter', 'PRO'] });
  expect((await slotsOf(project.id)).find((s) => s.slot === 't1')!.has_list).toBe(true);
  const withList = await countOf(project.id, pro);
  expect(withList.sql).not.toContain('slot_t1');
  expect(withList.count).toBe(3); // a, b, e
});

test('a slot a deleted field had is rewritten for the next field before the compiler uses it', async () => {
  const project = await env.project('slots reused');
  for (let i = 0; i < 5; i++) await contact(project, `p${i}@example.com`, { tier: i < 3 ? 'gold' : 'silver' });
  await segment(project.id, 'gold', { field: 'data.tier', operator: 'equals', value: 'gold' });
  await prepareFieldSlots(em(), project.id);
  // The registry forgets the field; the contacts keep their values (and slot_t1) until a delete
  // by batches would have removed them.
  await unregisterField(em(), project.id, 'tier');
  expect(await slotsOf(project.id)).toEqual([]);
  await contact(project, 'p0@example.com', { level: 'gold' });
  await segment(project.id, 'level gold', { field: 'data.level', operator: 'equals', value: 'gold' });
  const level: Condition = { field: 'data.level', operator: 'equals', value: 'gold' };
  expect(await prepareFieldSlots(em(), project.id)).toEqual({ prepared: ['level → t1'] });
  const counted = await countOf(project.id, level);
  expect(counted.sql).toContain('slot_t1');
  expect(counted.count).toBe(1);
  const stale = await queryOne<{ n: number }>(em(), `select count(*)::int as n from contacts where project_id = ? and slot_t1 is not null`, [project.id]);
  expect(stale!.n).toBe(1);
});

test('four slots of a type per project; a fifth field keeps the JSON expression and the same answer', async () => {
  const project = await env.project('slots full');
  const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
  await contact(project, 'x@example.com', Object.fromEntries(keys.map((k) => [k, 'yes'])));
  await contact(project, 'y@example.com', Object.fromEntries(keys.map((k) => [k, 'no'])));
  for (const k of keys) await segment(project.id, k, { field: `data.${k}`, operator: 'equals', value: 'YES' });
  const { prepared } = await prepareFieldSlots(em(), project.id);
  expect(prepared).toHaveLength(4);
  expect((await slotsOf(project.id)).map((s) => s.slot)).toEqual(['t1', 't2', 't3', 't4']);
  const fifth = await countOf(project.id, { field: 'data.k5', operator: 'equals', value: 'YES' });
  expect(fifth.sql).not.toContain('slot_');
  expect(fifth.count).toBe(1);
});

test('the back-fill waits for transactions that were writing contacts when the mapping was committed', async () => {
  const project = await env.project('slots writers');
  const writer = new Client({ connectionString: process.env.TEST_DATABASE_URL });
  await writer.connect();
  try {
    await writer.query('begin');
    await writer.query(`insert into contacts (id, project_id, email, subscribed, data) values ('cnt_slot_writer', $1, 'w@example.com', true, '{}')`, [project.id]);
    await expect(waitForEarlierContactWriters(em(), 300)).rejects.toThrow(/still running/);
    // On one connection of its own, so that its backend shows what it is doing.
    let pid: number | undefined;
    let settled = false;
    const waiting = transaction(em(), async (tx) => {
      pid = (await queryOne<{ pid: number }>(tx, 'select pg_backend_pid() as pid'))!.pid;
      await waitForEarlierContactWriters(tx, 10_000);
    }).finally(() => (settled = true));
    // It has found the writer once it polls for that transaction's end.
    await waitUntil(
      async () =>
        pid !== undefined &&
        (await queryOne(em(), `select 1 as polling from pg_stat_activity where pid = ? and query like '%virtualtransaction = any%'`, [pid])),
      { timeoutMs: 5_000, what: 'the back-fill polling for the writer' },
    );
    expect(settled).toBe(false);
    await writer.query('commit');
    await waiting;
  } finally {
    await writer.end();
  }
});

test('POST /segments asks the prepareFieldSlots workflow for slots; the count then reads the slot', async () => {
  const project = await env.project('slots via api');
  await contact(project, 'a@example.com', { score: 7 });
  await contact(project, 'b@example.com', { score: '12' });
  const res = await env
    .http()
    .post('/segments')
    .set(bearer(project.secretKey))
    .send({ name: 'high', type: 'DYNAMIC', condition: { field: 'data.score', operator: 'greaterThanOrEqual', value: 10 } });
  expect(res.status).toBe(201);
  await waitUntil(async () => (await slotsOf(project.id)).some((s) => s.key === 'score' && s.ready), 30_000);
  expect(await slotWorkflowResult(project.id)).toEqual({ prepared: ['score → n1'] });
  expect((await countOf(project.id, { field: 'data.score', operator: 'greaterThanOrEqual', value: 10 })).sql).toContain('slot_n1');
  expect((await refreshSegmentCount(em(), project.id, res.body.id as string)).memberCount).toBe(1);
});

test('a number slot orders numbers as doubles: segment_num_key in SQL and numberKey in TypeScript agree', async () => {
  const texts = ['-1e400', '-1.7976931348623157e308', '-12.5', '-1', '-0.1', '-1e-300', '-5e-324', '0', '0.0', '1e-330', '5e-324', '1e-320', '0.1', '1', '2', '30', '30.5',
    '10000000000000001', '9007199254740993', '1e308', '1e400'];
  const rows = await query<{ t: string; k: string }>(em(), 'select t, segment_num_key(t::numeric)::text as k from unnest(?::text[]) t', [texts]);
  expect(rows.map((r) => r.k)).toEqual(texts.map((t) => numberKey(Number(t)).toString()));
  const byKey = [...rows].sort((a, b) => (BigInt(a.k) < BigInt(b.k) ? -1 : BigInt(a.k) > BigInt(b.k) ? 1 : 0)).map((r) => Number(r.t));
  expect(byKey).toEqual(texts.map(Number).sort((a, b) => a - b));
});

test('a refresh asks for the slot of a field that had no type when its segment was saved', async () => {
  const project = await env.project('slots on refresh');
  const res = await env
    .http()
    .post('/segments')
    .set(bearer(project.secretKey))
    .send({ name: 'gold', type: 'DYNAMIC', condition: { field: 'data.tier', operator: 'equals', value: 'gold' } });
  expect(res.status).toBe(201);
  expect(await slotWorkflowResult(project.id)).toEqual({ prepared: [] }); // no contact has data.tier: no type yet
  await contact(project, 'a@example.com', { tier: 'Gold' });
  const refreshed = await env.http().post(`/segments/${res.body.id as string}/refresh`).set(bearer(project.secretKey));
  expect(refreshed.body).toMatchObject({ memberCount: 1 });
  await waitUntil(async () => (await slotsOf(project.id)).some((s) => s.key === 'tier' && s.ready), 30_000);
  expect((await countOf(project.id, { field: 'data.tier', operator: 'equals', value: 'gold' })).sql).toContain('slot_t1');
});

test('an index build that was cut off (an invalid index) is dropped and built again', async () => {
  // d4: the one slot no other test file's project reaches (they share the database).
  await query(em(), 'drop index if exists contacts_slot_d4');
  await query(em(), 'create index contacts_slot_d4 on contacts (project_id)');
  await query(em(), `update pg_index set indisvalid = false where indexrelid = 'contacts_slot_d4'::regclass`);
  await ensureSlotIndex(em(), 'd4');
  const row = await queryOne<{ valid: boolean; def: string }>(
    em(),
    `select i.indisvalid as valid, pg_get_indexdef(i.indexrelid) as def from pg_index i where i.indexrelid = 'contacts_slot_d4'::regclass`,
  );
  expect(row).toEqual({ valid: true, def: expect.stringContaining('(project_id, slot_d4, subscribed) WHERE (slot_d4 IS NOT NULL)') });
});
