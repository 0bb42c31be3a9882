import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A fresh project and request helpers bound to its secret key. */
async function client() {
  const p = await env.project();
  const auth = bearer(p.secretKey);
  return {
    project: p,
    post: (body: unknown) => env.http().post('/contacts').set(auth).send(body as object),
    get: (id: string) => env.http().get(`/contacts/${id}`).set(auth),
    patch: (id: string, body: unknown) => env.http().patch(`/contacts/${id}`).set(auth).send(body as object),
    del: (id: string) => env.http().delete(`/contacts/${id}`).set(auth),
    list: (q: Record<string, string | number> = {}) => env.http().get('/contacts').query(q).set(auth),
    lookup: (emails: unknown) => env.http().post('/contacts/lookup').set(auth).send({ emails }),
  };
}

describe('POST /contacts', () => {
  test('creates a contact: 201, cnt_ id, lower-cased email, subscribed by default, _meta.isNew', async () => {
    const c = await client();
    const res = await c.post({ email: 'Ada@Example.io', data: { plan: 'pro' } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^cnt_[0-9a-f]+$/),
      email: 'ada@example.io',
      subscribed: true,
      data: { plan: 'pro' },
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
      _meta: { isNew: true, isUpdate: false },
    });
    const got = await c.get(res.body.id);
    expect(got.status).toBe(200);
    const { _meta, ...contact } = res.body;
    expect(got.body).toEqual(contact);
  });

  test('the same email in another case updates the same contact: 200, _meta.isUpdate', async () => {
    const c = await client();
    const first = await c.post({ email: 'A@X.io', subscribed: false, data: { plan: 'free', seats: 1 } });
    expect(first.status).toBe(201);
    const second = await c.post({ email: 'a@x.io', data: { plan: 'pro' } });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({
      id: first.body.id,
      email: 'a@x.io',
      // omitted `subscribed` keeps the existing state
      subscribed: false,
      data: { plan: 'pro', seats: 1 },
      createdAt: first.body.createdAt,
      _meta: { isNew: false, isUpdate: true },
    });
    expect(Date.parse(second.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(first.body.updatedAt));
    const third = await c.post({ email: 'A@x.IO', subscribed: true });
    expect(third.status).toBe(200);
    expect(third.body).toMatchObject({ id: first.body.id, subscribed: true, data: { plan: 'pro', seats: 1 } });
    const list = await c.list();
    expect(list.body.total).toBe(1);
  });

  test('concurrent upserts of one email make one contact: one 201, the rest 200, every key kept', async () => {
    const c = await client();
    const res = await Promise.all(Array.from({ length: 10 }, (_, i) => c.post({ email: i % 2 ? 'RACE@x.io' : 'race@X.io', data: { [`k${i}`]: i } })));
    expect(res.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect(res.filter((r) => r.body._meta.isNew)).toHaveLength(1);
    expect(new Set(res.map((r) => r.body.id)).size).toBe(1);
    const got = await c.get(res[0]!.body.id);
    expect(got.body.data).toEqual(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, i])));
  });

  test('an invalid email is a 422 with a field error on email', async () => {
    const c = await client();
    for (const email of ['not-an-email', 'a@', '@x.io', '']) {
      const res = await c.post({ email, data: { plan: 'pro' } });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({
        success: false,
        error: { code: 'VALIDATION_ERROR', statusCode: 422, errors: [expect.objectContaining({ field: 'email' })] },
      });
    }
    expect((await c.post({ email: 'nope' })).body.error.errors[0].code).toBe('invalid_string');
    expect((await c.post({ data: { plan: 'pro' } })).status).toBe(422);
    expect((await c.list()).body.total).toBe(0);
  });

  test('data must be an object', async () => {
    const c = await client();
    for (const data of [['a'], 'plan', 3]) {
      const res = await c.post({ email: 'a@x.io', data });
      expect(res.status).toBe(422);
      expect(res.body.error.errors[0].field).toBe('data');
    }
  });
});

describe('custom data rules', () => {
  test('data is a patch: unsent keys keep their values, on POST and on PATCH', async () => {
    const c = await client();
    const created = await c.post({ email: 'p@x.io', data: { a: 1, b: 'two', c: true } });
    await c.post({ email: 'p@x.io', data: { b: 'deux' } });
    expect((await c.get(created.body.id)).body.data).toEqual({ a: 1, b: 'deux', c: true });
    const patched = await c.patch(created.body.id, { data: { d: 4 } });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toEqual({ a: 1, b: 'deux', c: true, d: 4 });
    // a PATCH without data leaves data alone
    await c.patch(created.body.id, { subscribed: false });
    expect((await c.get(created.body.id)).body.data).toEqual({ a: 1, b: 'deux', c: true, d: 4 });
  });

  test('null removes a key; removing a missing key is harmless', async () => {
    const c = await client();
    const { body } = await c.post({ email: 'n@x.io', data: { a: 1, b: 2 } });
    const res = await c.patch(body.id, { data: { a: null, never: null } });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ b: 2 });
    const again = await c.post({ email: 'n@x.io', data: { b: null } });
    expect(again.body.data).toEqual({});
  });

  test('an empty string is ignored and the existing value kept', async () => {
    const c = await client();
    const { body } = await c.post({ email: 'e@x.io', data: { name: 'Ada', blank: '' } });
    expect(body.data).toEqual({ name: 'Ada' });
    expect((await c.patch(body.id, { data: { name: '' } })).body.data).toEqual({ name: 'Ada' });
    expect((await c.post({ email: 'e@x.io', data: { name: '' } })).body.data).toEqual({ name: 'Ada' });
  });

  test('{value, persistent:false} is not stored; {value, persistent:true} is stored unwrapped', async () => {
    const c = await client();
    const created = await c.post({
      email: 'w@x.io',
      data: { otp: { value: '123456', persistent: false }, link: { value: 'https://x.io/l', persistent: true } },
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toEqual({ link: 'https://x.io/l' });
    const patched = await c.patch(created.body.id, {
      data: { link: { value: 'https://x.io/other', persistent: false }, n: { value: 7, persistent: true } },
    });
    // a transient value does not overwrite the stored one either
    expect(patched.body.data).toEqual({ link: 'https://x.io/l', n: 7 });
    expect((await c.get(created.body.id)).body.data).toEqual({ link: 'https://x.io/l', n: 7 });
  });

  test('reserved keys are dropped silently; email and subscribed change only through their own fields', async () => {
    const c = await client();
    const reserved = {
      id: 'cnt_forged',
      svc_id: 'x',
      svc_email: 'x@x.io',
      email: 'other@x.io',
      unsubscribeUrl: 'https://evil.io/u',
      subscribeUrl: 'https://evil.io/s',
      manageUrl: 'https://evil.io/m',
      subscribed: false,
      createdAt: '2000-01-01T00:00:00Z',
      updatedAt: '2000-01-01T00:00:00Z',
    };
    const created = await c.post({ email: 'r@x.io', data: { ...reserved, keep: 'me' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ email: 'r@x.io', subscribed: true, data: { keep: 'me' } });
    expect(created.body.id).not.toBe('cnt_forged');
    expect(created.body.createdAt).not.toBe('2000-01-01T00:00:00.000Z');

    const patched = await c.patch(created.body.id, { data: { ...reserved, email: null, subscribed: null } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ email: 'r@x.io', subscribed: true, data: { keep: 'me' } });

    const upserted = await c.post({ email: 'r@x.io', data: reserved });
    expect(upserted.status).toBe(200);
    expect(upserted.body).toMatchObject({ id: created.body.id, email: 'r@x.io', subscribed: true, data: { keep: 'me' } });
    expect((await c.lookup(['other@x.io'])).body).toEqual({ found: [], notFound: ['other@x.io'] });

    // the dedicated fields do change them
    const real = await c.patch(created.body.id, { email: 'Renamed@X.io', subscribed: false });
    expect(real.body).toMatchObject({ id: created.body.id, email: 'renamed@x.io', subscribed: false, data: { keep: 'me' } });
  });

  test('locale is stored like any other key', async () => {
    const c = await client();
    const { body } = await c.post({ email: 'l@x.io', data: { locale: 'fr-FR' } });
    expect(body.data).toEqual({ locale: 'fr-FR' });
    expect((await c.patch(body.id, { data: { locale: 'de' } })).body.data).toEqual({ locale: 'de' });
    expect((await c.patch(body.id, { data: { locale: null } })).body.data).toEqual({});
  });

  test('nested objects and arrays are stored as-is; a patch replaces a top-level key whole', async () => {
    const c = await client();
    const address = { city: 'Paris', geo: { lat: 48.85, lng: 2.35 }, lines: ['1 rue X', null], empty: '' };
    const { body } = await c.post({ email: 'o@x.io', data: { address, tags: ['a', 'b'], plan: 'pro' } });
    expect(body.data).toEqual({ address, tags: ['a', 'b'], plan: 'pro' });
    expect((await c.get(body.id)).body.data.address.geo.lat).toBe(48.85);
    const patched = await c.patch(body.id, { data: { address: { city: 'Lyon' } } });
    expect(patched.body.data).toEqual({ address: { city: 'Lyon' }, tags: ['a', 'b'], plan: 'pro' });
  });
});

describe('PATCH /contacts/:id', () => {
  test('changing the email to one another contact has is a 409 and changes nothing', async () => {
    const c = await client();
    const a = await c.post({ email: 'a@x.io', data: { who: 'a' } });
    await c.post({ email: 'b@x.io' });
    const res = await c.patch(a.body.id, { email: 'B@x.io', data: { who: 'changed' } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ success: false, error: { code: 'CONFLICT', statusCode: 409 } });
    expect((await c.get(a.body.id)).body).toMatchObject({ email: 'a@x.io', data: { who: 'a' } });
  });

  test('changing the email to its own address in another case is allowed', async () => {
    const c = await client();
    const a = await c.post({ email: 'same@x.io' });
    const res = await c.patch(a.body.id, { email: 'SAME@X.IO' });
    expect(res.status).toBe(200);
    expect(res.body.email).toBe('same@x.io');
  });

  test('validation: invalid email, empty body → 422; unknown id → 404', async () => {
    const c = await client();
    const a = await c.post({ email: 'v@x.io' });
    const bad = await c.patch(a.body.id, { email: 'nope' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors).toEqual([expect.objectContaining({ field: 'email', code: 'invalid_string' })]);
    expect((await c.patch(a.body.id, {})).status).toBe(422);
    const missing = await c.patch('cnt_doesnotexist', { data: { a: 1 } });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('CONTACT_NOT_FOUND');
  });
});

describe('GET / DELETE /contacts/:id', () => {
  test('delete, then get → 404 CONTACT_NOT_FOUND; a second delete → 404', async () => {
    const c = await client();
    const a = await c.post({ email: 'd@x.io' });
    const del = await c.del(a.body.id);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ id: a.body.id, deleted: true });
    const got = await c.get(a.body.id);
    expect(got.status).toBe(404);
    expect(got.body).toMatchObject({ success: false, error: { code: 'CONTACT_NOT_FOUND', statusCode: 404 } });
    expect((await c.del(a.body.id)).status).toBe(404);
    // the email is free again: a new contact with a new id
    const again = await c.post({ email: 'd@x.io' });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(a.body.id);
  });

  test('requests without a valid key are 401', async () => {
    const res = await env.http().get('/contacts');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('MISSING_AUTH');
    expect((await env.http().get('/contacts').set(bearer('sk_nope'))).status).toBe(401);
  });
});

describe('POST /contacts/lookup', () => {
  test('case-insensitive; found in stored form, notFound as sent, duplicates once', async () => {
    const c = await client();
    const a = await c.post({ email: 'Found@X.io' });
    const b = await c.post({ email: 'also@x.io' });
    const res = await c.lookup(['FOUND@x.io', 'missing@x.io', 'also@X.IO', 'found@x.io', 'Missing@X.io', 'other@x.io']);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      found: [
        { id: a.body.id, email: 'found@x.io' },
        { id: b.body.id, email: 'also@x.io' },
      ],
      notFound: ['missing@x.io', 'other@x.io'],
    });
  });

  test('500 emails are accepted; 501 or none → 422', async () => {
    const c = await client();
    await c.post({ email: 'u7@x.io' });
    const emails = Array.from({ length: 500 }, (_, i) => `u${i}@x.io`);
    const ok = await c.lookup(emails);
    expect(ok.status).toBe(200);
    expect(ok.body.found).toEqual([{ id: expect.stringMatching(/^cnt_/), email: 'u7@x.io' }]);
    expect(ok.body.notFound).toHaveLength(499);
    const tooMany = await c.lookup([...emails, 'u500@x.io']);
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.errors[0].field).toBe('emails');
    expect((await c.lookup([])).status).toBe(422);
    expect((await env.http().post('/contacts/lookup').set(bearer(c.project.secretKey)).send({})).status).toBe(422);
  });
});

describe('GET /contacts', () => {
  test('search matches a case-insensitive substring of the email; % and _ are literal', async () => {
    const c = await client();
    for (const email of ['alice@acme.io', 'bob@acme.io', 'carol@other.io', 'a_b@x.io', 'axb@x.io']) {
      await c.post({ email });
    }
    const emails = async (search: string) => {
      const res = await c.list({ search });
      expect(res.status).toBe(200);
      expect(res.body.total).toBe(res.body.data.length);
      return res.body.data.map((x: { email: string }) => x.email).sort();
    };
    expect(await emails('ACME')).toEqual(['alice@acme.io', 'bob@acme.io']);
    expect(await emails('lic')).toEqual(['alice@acme.io']);
    expect(await emails('a_b')).toEqual(['a_b@x.io']);
    // an unescaped % would match every contact
    expect(await emails('%')).toEqual([]);
    expect(await emails('nobody')).toEqual([]);
    const all = await c.list();
    expect(all.body).toMatchObject({ total: 5, hasMore: false, cursor: null });
    expect(all.body.data).toHaveLength(5);
  });

  test('subscribed=true|false keeps one side, combines with search and holds across pages', async () => {
    const c = await client();
    for (const [email, subscribed] of [
      ['in1@acme.io', true],
      ['in2@acme.io', true],
      ['in3@other.io', true],
      ['out1@acme.io', false],
      ['out2@other.io', false],
    ] as const) {
      await c.post({ email, subscribed });
    }
    const emails = async (q: Record<string, string | number>) => {
      const res = await c.list(q);
      expect(res.status).toBe(200);
      return res.body.data.map((x: { email: string }) => x.email).sort();
    };
    expect(await emails({ subscribed: 'false' })).toEqual(['out1@acme.io', 'out2@other.io']);
    expect(await emails({ subscribed: 'true', search: 'acme' })).toEqual(['in1@acme.io', 'in2@acme.io']);
    expect((await c.list({ subscribed: 'true' })).body.total).toBe(3);

    const first = await c.list({ subscribed: 'true', limit: 2 });
    expect(first.body).toMatchObject({ total: 3, hasMore: true });
    const second = await c.list({ subscribed: 'true', limit: 2, cursor: first.body.cursor });
    expect(second.body).toMatchObject({ hasMore: false, cursor: null });
    expect([...first.body.data, ...second.body.data].map((x: { email: string }) => x.email).sort()).toEqual([
      'in1@acme.io',
      'in2@acme.io',
      'in3@other.io',
    ]);
  });

  test('condition keeps the contacts a segment with that condition would hold, with the other filters and across pages', async () => {
    const c = await client();
    for (const [email, plan, subscribed] of [
      ['p1@acme.io', 'pro', true],
      ['p2@acme.io', 'pro', false],
      ['p3@other.io', 'pro', true],
      ['p4@other.io', 'pro', true],
      ['f1@acme.io', 'free', true],
      ['n1@acme.io', undefined, true],
    ] as const) {
      await c.post({ email, subscribed, ...(plan ? { data: { plan } } : {}) });
    }
    const pro = JSON.stringify({ field: 'data.plan', operator: 'equals', value: 'pro' });
    const emails = async (q: Record<string, string | number>) => {
      const res = await c.list(q);
      expect(res.status).toBe(200);
      return res.body.data.map((x: { email: string }) => x.email).sort();
    };
    expect(await emails({ condition: pro })).toEqual(['p1@acme.io', 'p2@acme.io', 'p3@other.io', 'p4@other.io']);
    expect(await emails({ condition: pro, search: 'acme', subscribed: 'true' })).toEqual(['p1@acme.io']);
    const group = { logic: 'OR', groups: [{ filters: [{ field: 'data.plan', operator: 'notExists' }] }, { filters: [{ field: 'email', operator: 'contains', value: 'f1' }] }] };
    expect(await emails({ condition: JSON.stringify(group) })).toEqual(['f1@acme.io', 'n1@acme.io']);

    const first = await c.list({ condition: pro, limit: 3 });
    expect(first.body).toMatchObject({ total: 4, hasMore: true });
    const second = await c.list({ condition: pro, limit: 3, cursor: first.body.cursor });
    expect(second.body.data.map((x: { email: string }) => x.email)).toEqual(['p1@acme.io']);

    // The same condition as a saved segment has the same members.
    const segment = await env.http().post('/segments').set(bearer(c.project.secretKey)).send({ name: 'Pro', condition: JSON.parse(pro) });
    expect(segment.body.memberCount).toBe(4);
    const inSegment = JSON.stringify({ field: `segment.${segment.body.id}`, operator: 'memberOfSegment' });
    expect(await emails({ condition: inSegment, subscribed: 'false' })).toEqual(['p2@acme.io']);
  });

  test('a condition that is not JSON, not a condition, or names an unknown segment is a 422 naming it', async () => {
    const c = await client();
    const fieldsOf = async (condition: string) => {
      const res = await c.list({ condition });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      return res.body.error.errors.map((e: { field: string; message: string }) => [e.field, e.message]);
    };
    expect(await fieldsOf('{plan')).toEqual([['query.condition', expect.stringContaining('Not valid JSON')]]);
    expect(await fieldsOf(JSON.stringify({ field: 'data.plan', operator: 'sortOf' }))).toEqual([['query.condition', expect.stringContaining('Invalid condition')]]);
    expect(await fieldsOf(JSON.stringify({ field: 'segment.seg_nope', operator: 'memberOfSegment' }))).toEqual([
      ['condition', 'Unknown segment: seg_nope'],
    ]);
  });

  test('a subscribed value other than true or false is a 422 naming the parameter', async () => {
    const c = await client();
    const res = await c.list({ subscribed: 'yes' });
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'query.subscribed' })]);
  });
});
