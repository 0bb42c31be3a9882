import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { hashKey, rotateProjectKeys } from '../../db/projects/projects';
import { disableProject, enableProject } from '../../db/projects/security';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ONE_MB = 1024 * 1024;

/** Every error response, whatever the status, has this shape (the OpenAPI description's Errors section). */
function expectEnvelope(res: Response, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.body as {
    success: unknown;
    message: unknown;
    error: { code: string; message: unknown; statusCode: unknown; requestId: unknown; suggestion: unknown };
    timestamp: unknown;
  };
  expect(body.success).toBe(false);
  expect(typeof body.error.message).toBe('string');
  expect((body.error.message as string).length).toBeGreaterThan(0);
  expect(body.message).toBe(body.error.message);
  expect(body.error.statusCode).toBe(status);
  expect(body.error.requestId).toMatch(UUID);
  expect(res.headers['x-request-id']).toBe(body.error.requestId);
  expect(typeof body.error.suggestion).toBe('string');
  expect((body.error.suggestion as string).trim().length).toBeGreaterThan(0);
  expect(typeof body.timestamp).toBe('string');
  expect(body.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
  expect(Number.isNaN(Date.parse(body.timestamp as string))).toBe(false);
  expect(Math.abs(Date.parse(body.timestamp as string) - Date.now())).toBeLessThan(60_000);
}

describe('error envelope', () => {
  test('400: malformed JSON body → VALIDATION_ERROR', async () => {
    const p = await env.project();
    const res = await env
      .http()
      .post('/contacts')
      .set(bearer(p.secretKey))
      .set('Content-Type', 'application/json')
      .send('{"email": "a@x.io",');
    expectEnvelope(res, 400, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toBeUndefined();
  });

  test('401: no Authorization header → MISSING_AUTH', async () => {
    const res = await env.http().get('/contacts');
    expectEnvelope(res, 401, 'MISSING_AUTH');
  });

  test('401: empty Authorization header → MISSING_AUTH', async () => {
    const res = await env.http().get('/contacts').set('Authorization', '');
    expectEnvelope(res, 401, 'MISSING_AUTH');
  });

  test('401: unknown key → INVALID_API_KEY', async () => {
    const res = await env.http().get('/contacts').set(bearer(`sk_${'0'.repeat(64)}`));
    expectEnvelope(res, 401, 'INVALID_API_KEY');
  });

  test('401: a key without a known prefix → INVALID_API_KEY', async () => {
    const res = await env.http().get('/contacts').set(bearer('not-a-key'));
    expectEnvelope(res, 401, 'INVALID_API_KEY');
  });

  test('401: a Basic header, even carrying a valid key → INVALID_API_KEY', async () => {
    const p = await env.project();
    const basic = `Basic ${Buffer.from(`${p.secretKey}:`).toString('base64')}`;
    expectEnvelope(await env.http().get('/contacts').set('Authorization', basic), 401, 'INVALID_API_KEY');
    expectEnvelope(await env.http().get('/contacts').set('Authorization', `Basic ${p.secretKey}`), 401, 'INVALID_API_KEY');
  });

  test('401: a rotated-away key → INVALID_API_KEY', async () => {
    const p = await env.project();
    await rotateProjectKeys(env.orm.em.fork(), p.id);
    expectEnvelope(await env.http().get('/contacts').set(bearer(p.secretKey)), 401, 'INVALID_API_KEY');
  });

  test('400: a body that cannot be read (corrupt gzip) → BAD_REQUEST, not a 500', async () => {
    const p = await env.project();
    const res = await env
      .http()
      .post('/contacts')
      .set(bearer(p.secretKey))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .send('this is not gzip');
    expectEnvelope(res, 400, 'BAD_REQUEST');
  });

  test('403: a write with a key of a disabled project → PROJECT_DISABLED; reads still answer', async () => {
    const p = await env.project();
    // Known to this API process first: a change made here is seen by its next request.
    expect((await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'before@x.io' })).status).toBe(201);
    await disableProject(env.orm.em.fork(), p.id, 'a test');
    expect((await env.http().get('/contacts').set(bearer(p.secretKey))).status).toBe(200);
    expectEnvelope(
      await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'off@x.io' }),
      403,
      'PROJECT_DISABLED',
    );
    await enableProject(env.orm.em.fork(), p.id);
    expect((await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'on@x.io' })).status).toBe(201);
  });

  test('404: unknown route → NOT_FOUND (with and without credentials)', async () => {
    expectEnvelope(await env.http().get('/no-such-route'), 404, 'NOT_FOUND');
    const p = await env.project();
    expectEnvelope(await env.http().put('/contacts').set(bearer(p.secretKey)).send({}), 404, 'NOT_FOUND');
  });

  test('404: unknown contact → CONTACT_NOT_FOUND', async () => {
    const p = await env.project();
    const res = await env.http().get('/contacts/cnt_doesnotexist').set(bearer(p.secretKey));
    expectEnvelope(res, 404, 'CONTACT_NOT_FOUND');
  });

  test("404: another project's contact → CONTACT_NOT_FOUND", async () => {
    const owner = await env.project();
    const other = await env.project();
    const created = await env.http().post('/contacts').set(bearer(owner.secretKey)).send({ email: 'owner@x.io' });
    expect(created.status).toBe(201);
    const res = await env.http().get(`/contacts/${created.body.id}`).set(bearer(other.secretKey));
    expectEnvelope(res, 404, 'CONTACT_NOT_FOUND');
  });

  test('413: JSON body over 1 MB → PAYLOAD_TOO_LARGE', async () => {
    const p = await env.project();
    const body = JSON.stringify({ email: 'big@x.io', data: { blob: 'x'.repeat(ONE_MB) } });
    expect(Buffer.byteLength(body)).toBeGreaterThan(ONE_MB);
    const res = await env
      .http()
      .post('/contacts')
      .set(bearer(p.secretKey))
      .set('Content-Type', 'application/json')
      .send(body);
    expectEnvelope(res, 413, 'PAYLOAD_TOO_LARGE');
  });

  test('a JSON body just under 1 MB is accepted', async () => {
    const p = await env.project();
    const envelope = JSON.stringify({ email: 'almost@x.io', data: { blob: '' } });
    const blob = 'x'.repeat(ONE_MB - Buffer.byteLength(envelope) - 1);
    const res = await env
      .http()
      .post('/contacts')
      .set(bearer(p.secretKey))
      .send({ email: 'almost@x.io', data: { blob } });
    expect(res.status).toBe(201);
  });

  test('422: zod failure → VALIDATION_ERROR with errors[{field,message,code}]', async () => {
    const p = await env.project();
    const res = await env.http().post('/contacts').set(bearer(p.secretKey)).send({ subscribed: 'yes' });
    expectEnvelope(res, 422, 'VALIDATION_ERROR');
    const errors = res.body.error.errors as Array<{ field: string; message: string; code: string }>;
    expect(Array.isArray(errors)).toBe(true);
    for (const item of errors) {
      expect(Object.keys(item).sort()).toEqual(['code', 'field', 'message']);
      expect(item.message.length).toBeGreaterThan(0);
    }
    expect(errors.map((e) => [e.field, e.code]).sort()).toEqual([
      ['email', 'invalid_type'],
      ['subscribed', 'invalid_type'],
    ]);
  });

  test('422: an invalid email gives item code invalid_string', async () => {
    const p = await env.project();
    const res = await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'not-an-email' });
    expectEnvelope(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([{ field: 'email', message: expect.any(String), code: 'invalid_string' }]);
  });

  test('422: invalid query parameters are reported with a query. prefix', async () => {
    const p = await env.project();
    const res = await env.http().get('/contacts?limit=1000').set(bearer(p.secretKey));
    expectEnvelope(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([{ field: 'query.limit', message: expect.any(String), code: 'too_big' }]);
  });
});

describe('request ids', () => {
  test('a valid incoming X-Request-Id is echoed in the header and the envelope', async () => {
    const id = randomUUID();
    const res = await env.http().get('/contacts').set('X-Request-Id', id);
    expectEnvelope(res, 401, 'MISSING_AUTH');
    expect(res.headers['x-request-id']).toBe(id);
    expect(res.body.error.requestId).toBe(id);
  });

  test('a non-UUID incoming X-Request-Id is replaced by a fresh UUID', async () => {
    const res = await env.http().get('/contacts').set('X-Request-Id', 'abc<script>');
    expectEnvelope(res, 401, 'MISSING_AUTH');
    expect(res.body.error.requestId).not.toBe('abc<script>');
  });

  test('each request gets its own id, and successful responses carry one too', async () => {
    const p = await env.project();
    const a = await env.http().get('/contacts').set(bearer(p.secretKey));
    const b = await env.http().get('/contacts').set(bearer(p.secretKey));
    expect(a.status).toBe(200);
    expect(a.headers['x-request-id']).toMatch(UUID);
    expect(b.headers['x-request-id']).toMatch(UUID);
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
  });
});

describe('authentication', () => {
  test('auth is checked before the body is parsed: no key + malformed body → 401', async () => {
    const res = await env.http().post('/contacts').set('Content-Type', 'application/json').send('{not json');
    expectEnvelope(res, 401, 'MISSING_AUTH');
  });

  test('auth is checked before the body size: bad key + oversized body → 401', async () => {
    const res = await env
      .http()
      .post('/contacts')
      .set(bearer(`sk_${'f'.repeat(64)}`))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ email: 'big@x.io', data: { blob: 'x'.repeat(ONE_MB) } }));
    expectEnvelope(res, 401, 'INVALID_API_KEY');
  });

  test('a public key on /contacts → 401 INVALID_API_KEY saying it only works on POST /v1/track', async () => {
    const p = await env.project();
    for (const req of [
      env.http().get('/contacts').set(bearer(p.publicKey)),
      env.http().post('/contacts').set(bearer(p.publicKey)).send({ email: 'pk@x.io' }),
      env.http().get('/contacts/fields').set(bearer(p.publicKey)),
    ]) {
      const res = await req;
      expectEnvelope(res, 401, 'INVALID_API_KEY');
      expect(res.body.error.message).toContain('POST /v1/track');
      expect(res.body.error.message).toMatch(/public key/i);
    }
    // Refused before anything happened: no contact was created.
    const list = await env.http().get('/contacts').set(bearer(p.secretKey));
    expect(list.status).toBe(200);
    expect(list.body.total).toBe(0);
  });

  test('the secret key of the same project works, with or without extra spaces, and "bearer" in any case', async () => {
    const p = await env.project();
    expect((await env.http().get('/contacts').set(bearer(p.secretKey))).status).toBe(200);
    expect((await env.http().get('/contacts').set('Authorization', `bearer   ${p.secretKey}`)).status).toBe(200);
    const created = await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'sk@x.io' });
    expect(created.status).toBe(201);
  });

  test('successful authenticated responses carry the default rate limit of 1000', async () => {
    const p = await env.project();
    const res = await env.http().get('/contacts').set(bearer(p.secretKey));
    expect(res.status).toBe(200);
    expect(res.headers['ratelimit-limit']).toBe('1000');
    expect(res.headers['ratelimit-remaining']).toBe('999');
  });
});

describe('key rotation', () => {
  const KEY = { secret: /^sk_[0-9a-f]{64}$/, public: /^pk_[0-9a-f]{64}$/ };

  test('keys have the documented shape and differ per project', async () => {
    const a = await env.project();
    const b = await env.project();
    expect(a.secretKey).toMatch(KEY.secret);
    expect(a.publicKey).toMatch(KEY.public);
    expect(new Set([a.secretKey.slice(3), a.publicKey.slice(3), b.secretKey.slice(3), b.publicKey.slice(3)]).size).toBe(4);
  });

  test('rotation: the old secret key stops working at once, the new one works', async () => {
    const p = await env.project();
    // Warm up: the old key is in use right before the rotation.
    expect((await env.http().get('/contacts').set(bearer(p.secretKey))).status).toBe(200);

    const rotated = await rotateProjectKeys(env.orm.em.fork(), p.id);
    expect(rotated.id).toBe(p.id);
    expect(rotated.name).toBe(p.name);
    expect(rotated.secretKey).toMatch(KEY.secret);
    expect(rotated.publicKey).toMatch(KEY.public);
    expect(rotated.secretKey).not.toBe(p.secretKey);
    expect(rotated.publicKey).not.toBe(p.publicKey);

    expectEnvelope(await env.http().get('/contacts').set(bearer(p.secretKey)), 401, 'INVALID_API_KEY');
    const ok = await env.http().post('/contacts').set(bearer(rotated.secretKey)).send({ email: 'after@x.io' });
    expect(ok.status).toBe(201);

    // The old public key is unknown (generic message); the new one is recognised as a public key.
    const oldPk = await env.http().get('/contacts').set(bearer(p.publicKey));
    expectEnvelope(oldPk, 401, 'INVALID_API_KEY');
    expect(oldPk.body.error.message).not.toContain('/v1/track');
    const newPk = await env.http().get('/contacts').set(bearer(rotated.publicKey));
    expectEnvelope(newPk, 401, 'INVALID_API_KEY');
    expect(newPk.body.error.message).toContain('POST /v1/track');
  });

  test('rotating an unknown project → PROJECT_NOT_FOUND', async () => {
    await expect(rotateProjectKeys(env.orm.em.fork(), 'prj_nope')).rejects.toMatchObject({
      status: 404,
      code: 'PROJECT_NOT_FOUND',
    });
  });

  test('the database never holds a clear key, before or after rotation', async () => {
    const p = await env.project();
    const rotated = await rotateProjectKeys(env.orm.em.fork(), p.id);
    const keys = [p.secretKey, p.publicKey, rotated.secretKey, rotated.publicKey];
    const em = env.orm.em.fork();

    const [row] = await query<Record<string, unknown>>(em, 'select * from projects where id = ?', [p.id]);
    expect(row).toBeDefined();
    for (const [column, value] of Object.entries(row!)) {
      const text = value instanceof Date ? value.toISOString() : String(value);
      for (const key of keys) {
        // Neither the key nor its random part (the 64 hex characters).
        expect({ column, leaks: text.includes(key) || text.includes(key.slice(3)) }).toEqual({ column, leaks: false });
      }
    }
    // What is stored instead: hashes of the current keys and short previews.
    expect(row!.secret_key_hash).toBe(hashKey(rotated.secretKey));
    expect(row!.public_key_hash).toBe(hashKey(rotated.publicKey));
    expect(rotated.secretKey.startsWith(String(row!.secret_key_preview))).toBe(true);
    expect(String(row!.secret_key_preview).length).toBeLessThanOrEqual(10);
    expect(String(row!.public_key_preview).length).toBeLessThanOrEqual(10);

    // And nowhere else in the database either (every row of every table, as text).
    const tables = await query<{ name: string }>(
      em,
      `select quote_ident(table_schema) || '.' || quote_ident(table_name) as name
         from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
    );
    expect(tables.map((t) => t.name)).toContain('public.projects');
    for (const { name } of tables) {
      for (const key of keys) {
        const [hit] = await query<{ n: number }>(
          em,
          `select count(*)::int as n from ${name} t where position(? in t::text) > 0`,
          [key.slice(3)],
        );
        expect({ table: name, rows: hit!.n }).toEqual({ table: name, rows: 0 });
      }
    }
  });
});
