import { randomUUID } from 'node:crypto';
import { listFields } from '../../db/contacts/fields';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
  // DELETE /contacts/fields/:field runs the deleteContactField workflow on this file's queue.
  await env.startWorker();
});
afterAll(() => env.close());

interface Descriptor {
  field: string;
  type: string;
  isCustom: boolean;
  coverage: number;
}

const STANDARD = (coverage: number): Descriptor[] => [
  { field: 'email', type: 'string', isCustom: false, coverage },
  { field: 'subscribed', type: 'boolean', isCustom: false, coverage },
  { field: 'createdAt', type: 'date', isCustom: false, coverage },
  { field: 'updatedAt', type: 'date', isCustom: false, coverage },
];

async function client() {
  const p = await env.project();
  const auth = bearer(p.secretKey);
  const c = {
    project: p,
    post: (email: string, data?: Record<string, unknown>, subscribed?: boolean) =>
      env.http().post('/contacts').set(auth).send({ email, data, subscribed }),
    patch: (id: string, body: object) => env.http().patch(`/contacts/${id}`).set(auth).send(body),
    get: (id: string) => env.http().get(`/contacts/${id}`).set(auth),
    del: (id: string) => env.http().delete(`/contacts/${id}`).set(auth),
    fieldsRes: () => env.http().get('/contacts/fields').set(auth),
    async fields(): Promise<Descriptor[]> {
      const res = await c.fieldsRes();
      expect(res.status).toBe(200);
      return res.body.fields;
    },
    async custom(): Promise<Record<string, { type: string; coverage: number }>> {
      const out: Record<string, { type: string; coverage: number }> = {};
      for (const f of await c.fields()) if (f.isCustom) out[f.field] = { type: f.type, coverage: f.coverage };
      return out;
    },
    async typeOf(field: string): Promise<string | undefined> {
      return (await c.custom())[field]?.type;
    },
    values: (field: string, q: Record<string, string | number> = {}) =>
      env.http().get(`/contacts/fields/${encodeURIComponent(field)}/values`).query(q).set(auth),
    deleteField: (field: string) => env.http().delete(`/contacts/fields/${encodeURIComponent(field)}`).set(auth),
  };
  return c;
}

/** Contacts of a project that still carry a data key, straight from Postgres. */
async function countWithKey(projectId: string, key: string): Promise<number> {
  const rows = await query<{ n: string }>(env.orm.em.fork(), 'select count(*) as n from contacts where project_id = ? and data \\? ?::text', [
    projectId,
    key,
  ]);
  return Number(rows[0]!.n);
}

describe('type inference through the API', () => {
  test('each inferred type', async () => {
    const c = await client();
    await c.post('t@x.io', {
      n: 42,
      zero: 0,
      flag: false,
      day: '2024-01-31',
      at: '2024-01-31T10:20:30Z',
      atMs: '2024-01-31T10:20:30.123Z',
      us: '01/31/2024',
      bad: '2024-13-45',
      feb30: '2024-02-30',
      offset: '2024-01-31T10:20:30+02:00',
      numeric: '42',
      word: 'hello',
      nested: { a: 1 },
    });
    expect(await c.custom()).toEqual({
      'data.at': { type: 'date', coverage: 1 },
      'data.atMs': { type: 'date', coverage: 1 },
      'data.bad': { type: 'string', coverage: 1 },
      'data.day': { type: 'date', coverage: 1 },
      'data.feb30': { type: 'string', coverage: 1 },
      'data.flag': { type: 'boolean', coverage: 1 },
      'data.n': { type: 'number', coverage: 1 },
      'data.nested': { type: 'string', coverage: 1 },
      'data.numeric': { type: 'string', coverage: 1 },
      'data.offset': { type: 'string', coverage: 1 },
      'data.us': { type: 'string', coverage: 1 },
      'data.word': { type: 'string', coverage: 1 },
      'data.zero': { type: 'number', coverage: 1 },
    });
  });

  test('the first non-null stored value fixes the type; later values of another type are still stored', async () => {
    const c = await client();
    const a = await c.post('a@x.io', { score: null });
    await c.post('a@x.io', { score: '' });
    await c.post('a@x.io', { score: { value: 'transient', persistent: false } });
    // nothing was stored yet, so nothing is typed yet
    expect(await c.typeOf('data.score')).toBeUndefined();

    const b = await c.post('b@x.io', { score: 10 });
    expect(await c.typeOf('data.score')).toBe('number');
    const other = await c.post('c@x.io', { score: 'high' });
    expect(other.body.data).toEqual({ score: 'high' });
    await c.patch(b.body.id, { data: { score: true } });
    expect((await c.get(b.body.id)).body.data).toEqual({ score: true });
    await c.patch(a.body.id, { data: { score: '2024-01-01' } });
    expect(await c.custom()).toEqual({ 'data.score': { type: 'number', coverage: 1 } });

    // removing the value from every contact does not reset the type
    for (const id of [a.body.id, b.body.id, other.body.id]) await c.patch(id, { data: { score: null } });
    await c.post('d@x.io', { score: 'text' });
    expect(await c.typeOf('data.score')).toBe('number');
  });

  test('{value, persistent:true} is typed by its value', async () => {
    const c = await client();
    await c.post('w@x.io', { since: { value: '2024-05-01', persistent: true } });
    expect(await c.typeOf('data.since')).toBe('date');
  });

  test('concurrent first writes of different types all succeed and agree on one type', async () => {
    const c = await client();
    const values = [1, 'one', true, '2024-01-01', 2, 'two', false, '2024-01-02'];
    const res = await Promise.all(values.map((v, i) => c.post(`race${i}@x.io`, { race: v })));
    expect(res.map((r) => r.status)).toEqual(values.map(() => 201));
    const fields = (await c.fields()).filter((f) => f.field === 'data.race');
    expect(fields).toHaveLength(1);
    expect(['number', 'string', 'boolean', 'date']).toContain(fields[0]!.type);
  });
});

describe('GET /contacts/fields', () => {
  test('standard fields, then data.<key> with exact coverage', async () => {
    const c = await client();
    await c.post('1@x.io', { plan: 'pro', age: 30 });
    await c.post('2@x.io', { plan: 'free' });
    await c.post('3@x.io', { plan: 'pro', vip: true });
    await c.post('4@x.io');
    expect(await c.fields()).toEqual([
      ...STANDARD(1),
      { field: 'data.age', type: 'number', isCustom: true, coverage: 0.25 },
      { field: 'data.plan', type: 'string', isCustom: true, coverage: 0.75 },
      { field: 'data.vip', type: 'boolean', isCustom: true, coverage: 0.25 },
    ]);
  });

  test('coverage moves with removals and deletions; 0 contacts → coverage 0', async () => {
    const c = await client();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await c.post(`${i}@x.io`, { k: i === 0 ? 'x' : null })).body.id);
    const k = (await c.custom())['data.k']!;
    expect(k.type).toBe('string');
    expect(k.coverage).toBeCloseTo(1 / 3, 4);
    await c.patch(ids[0]!, { data: { k: null } });
    expect((await c.custom())['data.k']).toEqual({ type: 'string', coverage: 0 });
    await c.patch(ids[1]!, { data: { k: 'y' } });
    await c.del(ids[0]!);
    expect((await c.custom())['data.k']).toEqual({ type: 'string', coverage: 0.5 });
    await c.del(ids[1]!);
    await c.del(ids[2]!);
    expect(await c.fields()).toEqual([...STANDARD(0), { field: 'data.k', type: 'string', isCustom: true, coverage: 0 }]);
  });

  test('a fresh project lists the standard fields with coverage 0', async () => {
    const c = await client();
    expect(await c.fields()).toEqual(STANDARD(0));
  });
});

describe('GET /contacts/fields/:field/values', () => {
  test('distinct values, most frequent first, with limit', async () => {
    const c = await client();
    const plans = ['pro', 'free', 'pro', 'team', 'pro', 'free'];
    for (const [i, plan] of plans.entries()) await c.post(`${i}@x.io`, { plan, seats: i < 4 ? 5 : 1 });
    await c.post('none@x.io', { other: 1 });

    const all = await c.values('data.plan');
    expect(all.status).toBe(200);
    expect(all.body).toEqual({ field: 'data.plan', values: ['pro', 'free', 'team'], count: 3 });
    expect((await c.values('data.plan', { limit: 2 })).body).toEqual({ field: 'data.plan', values: ['pro', 'free'], count: 2 });
    // a bare key names the custom field too; numbers come back as numbers
    expect((await c.values('seats')).body).toEqual({ field: 'data.seats', values: [5, 1], count: 2 });
    expect((await c.values('data.unknown')).body).toEqual({ field: 'data.unknown', values: [], count: 0 });
  });

  test('standard fields have values too', async () => {
    const c = await client();
    await c.post('1@x.io', undefined, false);
    await c.post('2@x.io', undefined, true);
    await c.post('3@x.io', undefined, false);
    expect((await c.values('subscribed')).body).toEqual({ field: 'subscribed', values: [false, true], count: 2 });
  });

  test('limit must be an integer from 1 to 200', async () => {
    const c = await client();
    for (const limit of [0, 201, 'abc', 1.5]) {
      const res = await c.values('data.plan', { limit });
      expect(res.status).toBe(422);
      expect(res.body.error.errors[0].field).toBe('query.limit');
    }
    expect((await c.values('data.plan', { limit: 200 })).status).toBe(200);
  });
});

describe('DELETE /contacts/fields/:field', () => {
  test("removes the key from every contact of that project only, and from the project's fields", async () => {
    const [one, two] = [await client(), await client()];
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await one.post(`${i}@x.io`, i < 3 ? { plan: 'pro', keep: i } : { keep: i })).body.id);
    for (let i = 0; i < 2; i++) await two.post(`${i}@x.io`, { plan: 'team' });

    const res = await one.deleteField('data.plan');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ field: 'data.plan', removed: 3 });

    for (const [i, id] of ids.entries()) expect((await one.get(id)).body.data).toEqual({ keep: i });
    expect(await one.custom()).toEqual({ 'data.keep': { type: 'number', coverage: 1 } });
    expect((await one.values('data.plan')).body.values).toEqual([]);

    expect(await countWithKey(two.project.id, 'plan')).toBe(2);
    expect(await two.custom()).toEqual({ 'data.plan': { type: 'string', coverage: 1 } });
    expect((await two.values('data.plan')).body).toEqual({ field: 'data.plan', values: ['team'], count: 1 });

    // the registry entry went with it: the next value types the key afresh
    await one.patch(ids[0]!, { data: { plan: 5 } });
    expect(await one.typeOf('data.plan')).toBe('number');
  });

  test('a bare key names the custom field; a registered key no contact holds is deleted with removed 0', async () => {
    const c = await client();
    const a = await c.post('a@x.io', { gone: 'x', kept: 'y' });
    const res = await c.deleteField('gone');
    expect(res.body).toEqual({ field: 'data.gone', removed: 1 });
    expect((await c.get(a.body.id)).body.data).toEqual({ kept: 'y' });

    await c.patch(a.body.id, { data: { orphan: 1 } });
    await c.patch(a.body.id, { data: { orphan: null } });
    expect(await c.typeOf('data.orphan')).toBe('number');
    const orphan = await c.deleteField('data.orphan');
    expect(orphan.status).toBe(200);
    expect(orphan.body).toEqual({ field: 'data.orphan', removed: 0 });
    expect(await c.typeOf('data.orphan')).toBeUndefined();
  });

  test('standard fields → 422; unknown field → 404', async () => {
    const c = await client();
    await c.post('a@x.io', { plan: 'pro' });
    for (const field of ['email', 'subscribed', 'createdAt', 'updatedAt']) {
      const res = await c.deleteField(field);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
    const missing = await c.deleteField('data.nope');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('FIELD_NOT_FOUND');
    expect(await countWithKey(c.project.id, 'plan')).toBe(1);
  });

  test("another project's field is a 404 and stays in place", async () => {
    const [owner, stranger] = [await client(), await client()];
    await owner.post('a@x.io', { secret: 'x' });
    const res = await stranger.deleteField('data.secret');
    expect(res.status).toBe(404);
    expect(await countWithKey(owner.project.id, 'secret')).toBe(1);
    expect(await owner.typeOf('data.secret')).toBe('string');
  });
});

describe('deleteContactField workflow', () => {
  test('removes the key in batches through its activity, in Postgres, for that project only', async () => {
    const [c, other] = [await client(), await client()];
    const posts: Promise<unknown>[] = [];
    for (let i = 0; i < 50; i++) posts.push(c.post(`w${i}@x.io`, { promo: `code${i}`, n: i }));
    for (let i = 0; i < 3; i++) posts.push(c.post(`plain${i}@x.io`, { n: i }));
    for (let i = 0; i < 4; i++) posts.push(other.post(`w${i}@x.io`, { promo: 'theirs' }));
    await Promise.all(posts);
    expect(await countWithKey(c.project.id, 'promo')).toBe(50);

    const handle = await env.temporal.client.workflow.start('deleteContactField', {
      taskQueue: env.taskQueue,
      workflowId: `test-delete-field-${randomUUID()}`,
      args: [{ projectId: c.project.id, key: 'promo', batchSize: 7 }],
    });
    expect(await handle.result()).toEqual({ removed: 50 });

    expect(await countWithKey(c.project.id, 'promo')).toBe(0);
    expect(await countWithKey(c.project.id, 'n')).toBe(53);
    expect(await countWithKey(other.project.id, 'promo')).toBe(4);
    expect(await c.typeOf('data.promo')).toBeUndefined();

    // 50 = 7 full batches of 7 + a last one of 1: eight batch activities
    const history = await handle.fetchHistory();
    const batches = (history.events ?? []).filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'removeContactFieldBatch',
    );
    expect(batches).toHaveLength(8);
  });
});

describe('coverage in a large project', () => {
  test('is estimated from a random sample, close to the exact share, and exact below the sample size', async () => {
    const c = await client();
    // 600 contacts: every one has `plan`, one in three `team`.
    await query(
      env.orm.em.fork(),
      `insert into contacts (id, project_id, email, subscribed, data)
       select 'cnt_cov_' || i || '_' || ?::text, ?, 'cov' || i || '@x.io', true,
              case when i % 3 = 0 then '{"plan": "pro", "team": "a"}'::jsonb else '{"plan": "pro"}'::jsonb end
       from generate_series(1, 600) i`,
      [c.project.id, c.project.id],
    );
    await query(env.orm.em.fork(), `insert into contact_fields (project_id, key, type) values (?, 'plan', 'string'), (?, 'team', 'string')`, [
      c.project.id,
      c.project.id,
    ]);
    const coverage = (fields: Descriptor[]) => Object.fromEntries(fields.filter((f) => f.isCustom).map((f) => [f.field, f.coverage]));

    expect(coverage(await listFields(env.orm.em.fork(), c.project.id))).toEqual({ 'data.plan': 1, 'data.team': 0.3333 });
    // A sample of about 200 of the 600: `plan` is on every sampled contact; `team`'s share is near a third
    // (four standard errors either side: a run outside it is a broken sample, not chance).
    const sampled = coverage(await listFields(env.orm.em.fork(), c.project.id, 200));
    expect(sampled['data.plan']).toBe(1);
    expect(Math.abs(sampled['data.team']! - 1 / 3)).toBeLessThan(0.14);
  });
});
