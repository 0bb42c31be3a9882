import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

/** Request helpers bound to one project's secret key. */
function as(secretKey: string) {
  const auth = bearer(secretKey);
  return {
    post: (body: object) => env.http().post('/contacts').set(auth).send(body),
    get: (id: string) => env.http().get(`/contacts/${id}`).set(auth),
    patch: (id: string, body: object) => env.http().patch(`/contacts/${id}`).set(auth).send(body),
    del: (id: string) => env.http().delete(`/contacts/${id}`).set(auth),
    list: (q: Record<string, string | number> = {}) => env.http().get('/contacts').query(q).set(auth),
    lookup: (emails: string[]) => env.http().post('/contacts/lookup').set(auth).send({ emails }),
    fields: () => env.http().get('/contacts/fields').set(auth),
    values: (field: string) => env.http().get(`/contacts/fields/${field}/values`).set(auth),
  };
}

async function twoProjects() {
  const [pa, pb] = await Promise.all([env.project('A'), env.project('B')]);
  return { a: as(pa.secretKey), b: as(pb.secretKey) };
}

function expectContactNotFound(res: { status: number; body: { error?: { code?: string } } }) {
  expect(res.status).toBe(404);
  expect(res.body.error?.code).toBe('CONTACT_NOT_FOUND');
}

test("another project's key gets 404 on GET, PATCH and DELETE, and the contact is untouched", async () => {
  const { a, b } = await twoProjects();
  const created = await a.post({ email: 'owner@a.io', subscribed: true, data: { plan: 'pro' } });
  const id = created.body.id as string;

  expectContactNotFound(await b.get(id));
  expectContactNotFound(await b.patch(id, { email: 'stolen@b.io', subscribed: false, data: { plan: 'hacked', extra: 1 } }));
  expectContactNotFound(await b.patch(id, { data: { plan: null } }));
  expectContactNotFound(await b.del(id));

  const after = await a.get(id);
  expect(after.status).toBe(200);
  const { _meta, ...original } = created.body;
  expect(after.body).toEqual(original);
});

test("a 404 PATCH leaves no trace: the refused data keys are not registered as fields of either project", async () => {
  const { a, b } = await twoProjects();
  const { body } = await a.post({ email: 'owner@a.io', data: { plan: 'pro' } });
  await b.post({ email: 'someone@b.io' });
  expectContactNotFound(await b.patch(body.id, { data: { probe: 42 } }));
  expectContactNotFound(await a.patch('cnt_missing', { data: { ghost: true } }));
  const fieldNames = async (c: ReturnType<typeof as>) => (await c.fields()).body.fields.map((f: { field: string }) => f.field);
  expect(await fieldNames(a)).toEqual(['email', 'subscribed', 'createdAt', 'updatedAt', 'data.plan']);
  expect(await fieldNames(b)).toEqual(['email', 'subscribed', 'createdAt', 'updatedAt']);
});

test("another project never sees the contact in its list, search or lookup", async () => {
  const { a, b } = await twoProjects();
  const mine = await a.post({ email: 'secret.person@a.io' });
  const theirs = await b.post({ email: 'visible@b.io' });

  const listB = await b.list({ limit: 100 });
  expect(listB.body).toMatchObject({ total: 1, hasMore: false, cursor: null });
  expect(listB.body.data.map((c: { id: string }) => c.id)).toEqual([theirs.body.id]);

  const searchB = await b.list({ search: 'secret' });
  expect(searchB.body).toMatchObject({ data: [], total: 0, hasMore: false });
  const searchA = await a.list({ search: 'secret' });
  expect(searchA.body.data.map((c: { id: string }) => c.id)).toEqual([mine.body.id]);

  expect((await b.lookup(['secret.person@a.io', 'VISIBLE@b.io'])).body).toEqual({
    found: [{ id: theirs.body.id, email: 'visible@b.io' }],
    notFound: ['secret.person@a.io'],
  });
  expect((await a.lookup(['secret.person@a.io', 'visible@b.io'])).body).toEqual({
    found: [{ id: mine.body.id, email: 'secret.person@a.io' }],
    notFound: ['visible@b.io'],
  });
});

test("a cursor made from another project's contact id yields only the caller's contacts", async () => {
  const { a, b } = await twoProjects();
  for (let i = 0; i < 3; i++) await a.post({ email: `a${i}@a.io` });
  const bIds: string[] = [];
  for (let i = 0; i < 3; i++) bIds.push((await b.post({ email: `b${i}@b.io` })).body.id);
  const pageA = await a.list({ limit: 1 });
  expect(pageA.body.hasMore).toBe(true);
  const foreign = await b.list({ cursor: pageA.body.cursor, limit: 100 });
  expect(foreign.status).toBe(200);
  expect(foreign.body.total).toBe(0);
  for (const c of foreign.body.data) expect(bIds).toContain(c.id);
});

test('the same email exists independently in two projects', async () => {
  const { a, b } = await twoProjects();
  const inA = await a.post({ email: 'Shared@X.io', subscribed: true, data: { side: 'a' } });
  const inB = await b.post({ email: 'shared@x.io', subscribed: false, data: { side: 'b' } });
  expect(inA.status).toBe(201);
  expect(inB.status).toBe(201);
  expect(inB.body._meta).toEqual({ isNew: true, isUpdate: false });
  expect(inB.body.id).not.toBe(inA.body.id);

  await b.patch(inB.body.id, { subscribed: true, data: { side: 'B!' } });
  expect((await a.get(inA.body.id)).body).toMatchObject({ email: 'shared@x.io', subscribed: true, data: { side: 'a' } });
  await b.del(inB.body.id);
  expect((await a.get(inA.body.id)).status).toBe(200);

  // renaming to an email that only the other project has is no conflict
  const other = await b.post({ email: 'other@x.io' });
  const renamed = await b.patch(other.body.id, { email: 'SHARED@x.io' });
  expect(renamed.status).toBe(200);
  expect(renamed.body.email).toBe('shared@x.io');
});

test("fields, coverage and values are computed from the caller's project only", async () => {
  const { a, b } = await twoProjects();
  await a.post({ email: '1@a.io', data: { plan: 'pro', onlyA: 1 } });
  await a.post({ email: '2@a.io' });
  // B has more contacts, all with plan (of another type), plus its own key
  for (let i = 0; i < 3; i++) await b.post({ email: `${i}@b.io`, data: { plan: i, onlyB: 'x' } });

  expect((await a.fields()).body.fields).toEqual([
    { field: 'email', type: 'string', isCustom: false, coverage: 1 },
    { field: 'subscribed', type: 'boolean', isCustom: false, coverage: 1 },
    { field: 'createdAt', type: 'date', isCustom: false, coverage: 1 },
    { field: 'updatedAt', type: 'date', isCustom: false, coverage: 1 },
    { field: 'data.onlyA', type: 'number', isCustom: true, coverage: 0.5 },
    { field: 'data.plan', type: 'string', isCustom: true, coverage: 0.5 },
  ]);
  const fieldsB = (await b.fields()).body.fields.filter((f: { isCustom: boolean }) => f.isCustom);
  expect(fieldsB).toEqual([
    { field: 'data.onlyB', type: 'string', isCustom: true, coverage: 1 },
    { field: 'data.plan', type: 'number', isCustom: true, coverage: 1 },
  ]);

  expect((await a.values('data.plan')).body).toEqual({ field: 'data.plan', values: ['pro'], count: 1 });
  expect((await b.values('data.onlyA')).body).toEqual({ field: 'data.onlyA', values: [], count: 0 });
  expect((await a.values('email')).body.values.sort()).toEqual(['1@a.io', '2@a.io']);
});
