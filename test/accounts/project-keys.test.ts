import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Response } from 'supertest';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { startStripeMock, type StripeMock } from '../helpers/stripe-mock';

/**
 * A project's secret key on the routes that name the project in the path (`/users/@me/projects/:id…`,
 * `/projects/:id…`): it works where :id is its own project (as ADMIN, short of deleting the
 * project), is refused on another project's id and changes nothing there, a public key is refused,
 * and members' sessions get what they got before. Billing runs against stripe-mock.
 */

let mock: StripeMock;
let env: TestEnv;
/** Outbox mode (no SMTP_URL): the project's outbox routes read this folder. */
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-keys-'));
let owner: TestUser;
let stranger: TestUser;

beforeAll(async () => {
  mock = await startStripeMock();
  env = await startTestEnv({
    STRIPE_SECRET_KEY: 'sk_test_tidings',
    STRIPE_WEBHOOK_SECRET: 'whsec_test_secret_for_tidings',
    STRIPE_PRICE_ID: 'price_tidings_monthly',
    STRIPE_API_URL: mock.url,
    DATA_DIR: dataDir,
  });
  [owner, stranger] = await Promise.all([createTestUser(env), createTestUser(env)]);
});

afterAll(async () => {
  await env?.close();
  await mock?.close();
});

interface Fixture {
  project: ProjectWithKeys;
  /** Set by `withOutboxMessage`: the id of a message of the project in the outbox. */
  messageId?: string;
  /** A plain member, the target of the member routes. */
  member: TestUser;
  /** An account that is not a member, for adding one. */
  newcomer: TestUser;
}

/** A fresh project named "Keys" owned by `owner`, with one member and one contact, and what the case needs. */
async function fixture(c?: Case): Promise<Fixture> {
  const project = await env.project('Keys');
  const [member, newcomer] = await Promise.all([createTestUser(env), createTestUser(env)]);
  await addTestMember(env, project.id, owner.id, 'OWNER');
  await addTestMember(env, project.id, member.id, 'MEMBER');
  expect((await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'c@keys.test' })).status).toBe(201);
  const f = { project, member, newcomer };
  await c?.before?.(f);
  return f;
}

const em = () => env.orm.em.fork();
const me = (f: Fixture) => `/users/@me/projects/${f.project.id}`;
const members = (f: Fixture) => `/projects/${f.project.id}/members`;

/** The project as a refused request must leave it: name, members, contacts, limits, and its key still valid. */
async function state(projectId: string) {
  return queryOne(
    em(),
    `select p.name, p.secret_key_hash,
            (select count(*)::int from project_members where project_id = p.id) as members,
            (select count(*)::int from contacts where project_id = p.id) as contacts,
            (select count(*)::int from billing_accounts where project_id = p.id) as billing
     from projects p where p.id = ?`,
    [projectId],
  );
}

interface Case {
  /** The operation as /openapi.json names it. */
  route: string;
  path: (f: Fixture) => string;
  body?: (f: Fixture) => object;
  /** Sets up what the route needs, in the fixture. */
  before?: (f: Fixture) => Promise<void>;
  /** What the project's own key gets: a success status, or a 403 code. */
  byKey: number | 'FORBIDDEN';
  /** What the owner's session gets (as before the key was admitted). */
  byOwner: number;
  /** The change the request made, seen from outside the response where there is one. */
  check?: (res: Response, f: Fixture) => Promise<void>;
}

const withCustomer = async (f: Fixture) => {
  await query(em(), `insert into billing_accounts (project_id, provider, customer_id) values (?, 'stripe', ?)`, [f.project.id, `cus_${randomUUID().replace(/-/g, '')}`]);
};

/** One of the project's emails, as the outbox writer leaves it (mail/outbox.ts names the file after its Message-ID). */
const withOutboxMessage = async (f: Fixture) => {
  const emailId = randomUUID();
  await query(em(), `insert into emails (id, project_id, source, to_email, from_email, subject, body, status) values (?, ?, 'transactional', 'c@keys.test', 'hi@keys.test', 'Keys', 'b', 'SENT')`, [
    emailId,
    f.project.id,
  ]);
  f.messageId = `_${emailId}_keys.test_`;
  const dir = path.join(dataDir, 'outbox');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, `${f.messageId}.eml`),
    `Message-ID: <${emailId}@keys.test>\r\nFrom: hi@keys.test\r\nTo: c@keys.test\r\nSubject: Keys\r\nDate: ${new Date().toUTCString()}\r\nContent-Type: text/plain\r\n\r\nHello\r\n`,
  );
};

const CASES: Case[] = [
  {
    route: 'PATCH /users/@me/projects/{id}',
    path: me,
    body: () => ({ name: 'Renamed' }),
    byKey: 200,
    byOwner: 200,
    check: async (res, f) => {
      expect(res.body).toMatchObject({ id: f.project.id, name: 'Renamed' });
      expect((await state(f.project.id))!.name).toBe('Renamed');
    },
  },
  {
    route: 'DELETE /users/@me/projects/{id}',
    path: me,
    byKey: 'FORBIDDEN',
    byOwner: 200,
    check: async (_res, f) => expect(await state(f.project.id)).toBeUndefined(),
  },
  {
    route: 'POST /users/@me/projects/{id}/regenerate-keys',
    path: (f) => `${me(f)}/regenerate-keys`,
    byKey: 200,
    byOwner: 200,
    check: async (res, f) => {
      expect((await env.http().get('/contacts').set(bearer(f.project.secretKey))).status).toBe(401);
      expect((await env.http().get('/contacts').set(bearer(res.body.secretKey))).status).toBe(200);
    },
  },
  {
    route: 'GET /users/@me/projects/{id}/security',
    path: (f) => `${me(f)}/security`,
    byKey: 200,
    byOwner: 200,
    check: async (res, f) => expect(res.body).toMatchObject({ projectId: f.project.id, disabled: false }),
  },
  {
    route: 'POST /users/@me/projects/{id}/reset',
    path: (f) => `${me(f)}/reset`,
    body: () => ({ confirm: 'Keys' }),
    byKey: 200,
    byOwner: 200,
    check: async (_res, f) => expect((await state(f.project.id))!.contacts).toBe(0),
  },
  {
    route: 'GET /users/@me/projects/{id}/billing-consumption',
    path: (f) => `${me(f)}/billing-consumption`,
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body.total).toBe(0),
  },
  {
    route: 'GET /users/@me/projects/{id}/billing-limits',
    path: (f) => `${me(f)}/billing-limits`,
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body).toEqual({ transactional: null, campaign: null, workflow: null }),
  },
  {
    route: 'PUT /users/@me/projects/{id}/billing-limits',
    path: (f) => `${me(f)}/billing-limits`,
    body: () => ({ campaign: 1000 }),
    byKey: 200,
    byOwner: 200,
    check: async (_res, f) => {
      const limits = await env.http().get(`${me(f)}/billing-limits`).set(bearer(f.project.secretKey));
      expect(limits.body.campaign).toBe(1000);
    },
  },
  {
    route: 'POST /users/@me/projects/{id}/checkout',
    path: (f) => `${me(f)}/checkout`,
    body: () => ({}),
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body.url).toMatch(/^https?:\/\//),
  },
  {
    route: 'POST /users/@me/projects/{id}/billing-portal',
    path: (f) => `${me(f)}/billing-portal`,
    body: () => ({}),
    before: withCustomer,
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body.url).toMatch(/^https?:\/\//),
  },
  {
    route: 'GET /users/@me/projects/{id}/billing-invoices',
    path: (f) => `${me(f)}/billing-invoices`,
    before: withCustomer,
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(Array.isArray(res.body.data)).toBe(true),
  },
  {
    route: 'GET /projects/{id}/setup-state',
    path: (f) => `/projects/${f.project.id}/setup-state`,
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body).toBeInstanceOf(Object),
  },
  {
    route: 'GET /projects/{id}/security',
    path: (f) => `/projects/${f.project.id}/security`,
    byKey: 200,
    byOwner: 200,
    check: async (res, f) => expect(res.body.projectId).toBe(f.project.id),
  },
  {
    route: 'GET /projects/{id}/outbox',
    path: (f) => `/projects/${f.project.id}/outbox`,
    before: withOutboxMessage,
    byKey: 200,
    byOwner: 200,
    check: async (res, f) => expect(res.body.data.map((m: { id: string }) => m.id)).toEqual([f.messageId]),
  },
  {
    route: 'GET /projects/{id}/outbox/{messageId}',
    path: (f) => `/projects/${f.project.id}/outbox/${f.messageId}`,
    before: withOutboxMessage,
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body).toMatchObject({ subject: 'Keys', text: 'Hello\n' }),
  },
  {
    route: 'GET /projects/{id}/members',
    path: members,
    byKey: 200,
    byOwner: 200,
    check: async (res, f) => expect(res.body.map((m: { userId: string }) => m.userId)).toEqual([owner.id, f.member.id]),
  },
  {
    route: 'POST /projects/{id}/members',
    path: members,
    body: (f) => ({ email: f.newcomer.email, role: 'MEMBER' }),
    byKey: 201,
    byOwner: 201,
    check: async (_res, f) => expect((await state(f.project.id))!.members).toBe(3),
  },
  {
    route: 'PATCH /projects/{id}/members/{userId}',
    path: (f) => `${members(f)}/${f.member.id}`,
    body: () => ({ role: 'ADMIN' }),
    byKey: 200,
    byOwner: 200,
    check: async (res) => expect(res.body.role).toBe('ADMIN'),
  },
  {
    route: 'DELETE /projects/{id}/members/{userId}',
    path: (f) => `${members(f)}/${f.member.id}`,
    byKey: 204,
    byOwner: 204,
    check: async (_res, f) => expect((await state(f.project.id))!.members).toBe(1),
  },
];

type Credentials = Record<string, string>;

function call(c: Case, f: Fixture, headers: Credentials): Promise<Response> {
  const method = c.route.split(' ')[0]!.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
  const req = env.http()[method](c.path(f)).set(headers);
  return c.body ? req.send(c.body(f)) : req;
}

const outcome = (res: Response) => (res.status < 400 ? res.status : res.body.error?.code);
const byRoute = CASES.map((c) => [c.route, c] as const);

test('the cases cover every operation under /users/@me/projects/{id} and /projects/{id}', async () => {
  const doc = await env.http().get('/openapi.json');
  const operations = Object.entries(doc.body.paths as Record<string, Record<string, unknown>>)
    .filter(([path]) => path.startsWith('/users/@me/projects/{id}') || path.startsWith('/projects/{id}'))
    .flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`));
  expect(operations.sort()).toEqual(CASES.map((c) => c.route).sort());
});

test.each(byRoute)("the project's own secret key: %s", async (_route, c) => {
  const f = await fixture(c);
  const before = await state(f.project.id);
  const res = await call(c, f, bearer(f.project.secretKey));
  expect({ status: res.status, outcome: outcome(res) }).toEqual({ status: typeof c.byKey === 'number' ? c.byKey : 403, outcome: c.byKey });
  if (typeof c.byKey === 'number') await c.check?.(res, f);
  else expect(await state(f.project.id)).toEqual(before);
});

test.each(byRoute)("another project's secret key gets 403 PROJECT_ACCESS_DENIED and changes nothing: %s", async (_route, c) => {
  const f = await fixture(c);
  const other = await env.project('Other');
  const before = await state(f.project.id);
  const res = await call(c, f, bearer(other.secretKey));
  expect([res.status, res.body.error?.code, res.body.success]).toEqual([403, 'PROJECT_ACCESS_DENIED', false]);
  expect(await state(f.project.id)).toEqual(before);
});

test.each(byRoute)('the public key stays refused (401 INVALID_API_KEY): %s', async (_route, c) => {
  const f = await fixture(c);
  const before = await state(f.project.id);
  const res = await call(c, f, bearer(f.project.publicKey));
  expect([res.status, res.body.error?.code]).toEqual([401, 'INVALID_API_KEY']);
  expect(await state(f.project.id)).toEqual(before);
});

test.each(byRoute)("sessions as before: the owner's succeeds, a non-member's gets 403 PROJECT_ACCESS_DENIED: %s", async (_route, c) => {
  const f = await fixture(c);
  const before = await state(f.project.id);
  const denied = await call(c, f, { Cookie: stranger.cookie });
  expect([denied.status, denied.body.error?.code]).toEqual([403, 'PROJECT_ACCESS_DENIED']);
  expect(await state(f.project.id)).toEqual(before);
  const res = await call(c, f, { Cookie: owner.cookie });
  expect(res.status).toBe(c.byOwner);
  await c.check?.(res, f);
  if (c.route === 'PATCH /users/@me/projects/{id}') expect(res.body.role).toBe('OWNER');
});

test("a key renames as ADMIN, the role it counts as; a member's session as before gets 403 FORBIDDEN", async () => {
  const f = await fixture();
  const renamed = await env.http().patch(me(f)).set(bearer(f.project.secretKey)).send({ name: 'By key' });
  expect(renamed.body.role).toBe('ADMIN');
  const byMember = await env.http().patch(me(f)).set({ Cookie: f.member.cookie }).send({ name: 'x' });
  expect([byMember.status, byMember.body.error.code]).toEqual([403, 'FORBIDDEN']);
  expect((await state(f.project.id))!.name).toBe('By key');
});

test("the user's own routes stay session-only: a secret key gets 401 on /users/@me and the project list", async () => {
  const f = await fixture();
  for (const [method, path] of [
    ['get', '/users/@me'],
    ['get', '/users/@me/projects'],
    ['post', '/users/@me/projects'],
  ] as const) {
    const res = await env.http()[method](path).set(bearer(f.project.secretKey)).send(method === 'post' ? { name: 'x' } : undefined);
    expect([path, res.status, res.body.error.code]).toEqual([path, 401, 'MISSING_AUTH']);
  }
  expect((await env.http().get('/users/@me').set({ Cookie: owner.cookie })).status).toBe(200);
});
