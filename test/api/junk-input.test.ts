import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { startTestEnv, type TestEnv } from '../helpers/env';
import type { ProjectWithKeys } from '../../db/projects/projects';

/**
 * Every route the OpenAPI document lists, called with credentials that get past authentication and
 * with input no client should send: junk path parameters, junk query strings, bodies of the wrong
 * shape. Whatever the route, the answer is a 4xx in the error envelope (or the route's own success
 * when it takes no input), never a 500. A page (unsubscribe, manage, a tracked link) answers a page.
 */

let env: TestEnv;
let project: ProjectWithKeys;
let owner: TestUser;
let ops: Op[];

interface Op {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI form: /contacts/{id} */
  path: string;
  sessionOnly: boolean;
  open: boolean;
}

const JUNK_PATH_VALUES = [
  'x',
  '%E0%A4%A', // not a valid percent-encoding
  'a'.repeat(300),
  encodeURIComponent('😀 ünï'),
  encodeURIComponent("' or 1=1 --"),
  '..%2F..%2Fetc%2Fpasswd',
  '-1',
];

const JUNK_QUERY = [
  'limit=-5',
  'limit=abc',
  'limit=100000',
  'cursor=%25%25not-a-cursor',
  'cursor=' + 'z'.repeat(500),
  'page=0',
  'pageSize=abc',
  'from=yesterday',
  'to=2026-13-45',
  'days=-3',
  'minutes=1e9',
  'status=WHATEVER',
  'type=',
  'q=' + 'x'.repeat(2000),
  'limit=1&limit=2',
  'contactId[$ne]=1',
].join('&');

const nested = (depth: number): unknown => (depth === 0 ? { leaf: true } : { a: nested(depth - 1) });
const JUNK_BODIES: { name: string; body: string }[] = [
  { name: 'an array', body: '[1, "two", {}]' },
  { name: 'a string', body: '"hello"' },
  { name: 'a number', body: '42' },
  { name: 'null', body: 'null' },
  { name: 'an empty object', body: '{}' },
  {
    name: 'wrong types everywhere',
    body: JSON.stringify({
      email: 123, data: 'x', name: [], subject: {}, body: 7, id: null, to: { a: 1 }, from: true, event: [], steps: 'none',
      condition: 5, scheduledFor: 'soon', role: 'KING', password: 1, token: {}, contactIds: 'all', ids: [null, 1, {}],
      limits: [], confirm: 'maybe', enabled: 'yes', type: 9, trigger: {}, segmentId: [], templateId: 1,
    }),
  },
  { name: 'deep nesting', body: JSON.stringify(nested(60)) },
  { name: 'prototype keys', body: '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}' },
];

beforeAll(async () => {
  env = await startTestEnv({ RATE_LIMIT_PER_MINUTE: '1000000' });
  project = await env.project('junk input');
  owner = await createTestUser(env);
  await addTestMember(env, project.id, owner.id, 'OWNER');
  const doc = (await env.http().get('/openapi.json').expect(200)).body as {
    paths: Record<string, Record<string, { security: Record<string, unknown>[] }>>;
  };
  ops = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const schemes = op.security.flatMap((s) => Object.keys(s));
      ops.push({
        method: method as Op['method'],
        path,
        open: schemes.length === 0,
        sessionOnly: schemes.length > 0 && schemes.every((s) => s === 'session'),
      });
    }
  }
}, 60_000);

afterAll(() => env?.close());

function call(op: Op, url: string, body?: string) {
  let req = env.http()[op.method](url);
  if (op.sessionOnly) req = req.set('Cookie', owner.cookie);
  else if (!op.open) req = req.set('Authorization', `Bearer ${project.secretKey}`);
  if (body !== undefined) req = req.set('content-type', 'application/json').send(body);
  return req;
}

/** Fills path parameters: the project's own id where a parameter names the project, junk elsewhere. */
function fill(path: string, junk: string, keepProject: boolean): string {
  return path.replace(/\{(\w+)\}/g, (_m, name: string, offset: number) => {
    const namesProject = keepProject && (path.startsWith('/projects/{') || path.startsWith('/users/@me/projects/{')) && offset < 25;
    return namesProject ? project.id : junk;
  });
}

// Calls that with the project's real id would really act on it, and would leave the rest of this
// sweep without a project or a key. Their refusals are tested with junk ids only.
const DESTRUCTIVE = /^(delete \/users\/@me\/projects\/\{id\}|post \/users\/@me\/projects\/\{id\}\/(regenerate-keys|reset))$/;

/**
 * "<status> <call>" for each answer that breaks the rule, so a failure lists them all at once. An
 * error is the JSON envelope, or a page where the route is a page (unsubscribe, manage, …).
 */
function check(failures: string[], label: string, res: { status: number; body: unknown; headers: Record<string, string> }) {
  const envelope = (res.body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const page = /^text\/(html|plain)/.test(res.headers['content-type'] ?? '');
  if (res.status >= 500) failures.push(`${res.status} ${label}`);
  else if (res.status >= 400 && !page && !(typeof envelope?.code === 'string' && typeof envelope.message === 'string')) {
    failures.push(`${res.status} without the error envelope: ${label}`);
  }
}

test('the sweep covers every documented route', () => {
  expect(ops.length).toBeGreaterThan(100);
  // The user's own routes (GET /users/@me, the project list and create, and one of /auth).
  expect(ops.filter((o) => o.sessionOnly).length).toBeGreaterThanOrEqual(4);
});

test('junk path parameters: 4xx in the envelope, never a 500', async () => {
  const failures: string[] = [];
  let calls = 0;
  for (const op of ops.filter((o) => o.path.includes('{'))) {
    for (const keepProject of [false, true]) {
      if (keepProject && DESTRUCTIVE.test(`${op.method} ${op.path}`)) continue;
      for (const junk of JUNK_PATH_VALUES) {
        const url = fill(op.path, junk, keepProject);
        const res = await call(op, url, op.method === 'get' || op.method === 'delete' ? undefined : '{}');
        calls++;
        check(failures, `${op.method.toUpperCase()} ${url.slice(0, 120)}`, res);
      }
    }
  }
  expect(calls).toBeGreaterThan(300);
  expect([...new Set(failures)]).toEqual([]);
}, 180_000);

test('junk query strings: 4xx in the envelope or the route ignoring them, never a 500', async () => {
  const failures: string[] = [];
  for (const op of ops.filter((o) => o.method === 'get')) {
    const url = `${fill(op.path, 'x', true)}?${JUNK_QUERY}`;
    check(failures, `GET ${op.path}?<junk>`, await call(op, url));
  }
  expect([...new Set(failures)]).toEqual([]);
}, 120_000);

test('bodies of the wrong shape: 4xx in the envelope, never a 500, and nothing written', async () => {
  const failures: string[] = [];
  for (const op of ops.filter((o) => o.method === 'post' || o.method === 'put' || o.method === 'patch')) {
    if (DESTRUCTIVE.test(`${op.method} ${op.path}`)) continue;
    const url = fill(op.path, 'x', true);
    for (const { name, body } of JUNK_BODIES) {
      check(failures, `${op.method.toUpperCase()} ${op.path} with ${name}`, await call(op, url, body));
    }
  }
  expect([...new Set(failures)]).toEqual([]);
  // Nothing of it landed: the project still has no contacts, templates, segments or workflows.
  for (const path of ['/contacts', '/templates', '/segments', '/workflows', '/campaigns']) {
    const res = await env.http().get(path).set('Authorization', `Bearer ${project.secretKey}`);
    expect([path, res.status, Array.isArray(res.body) ? res.body : res.body.data]).toEqual([path, 200, []]);
  }
  // No prototype was polluted on the way.
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
}, 180_000);

test('a session with a junk X-Project-Id header: 4xx in the envelope, never a 500', async () => {
  const failures: string[] = [];
  for (const op of ops.filter((o) => !o.open && !o.sessionOnly)) {
    const url = fill(op.path, 'x', false);
    for (const header of ['x', 'a'.repeat(500), "' or 1=1 --", project.id.toUpperCase()]) {
      let req = env.http()[op.method](url).set('Cookie', owner.cookie).set('X-Project-Id', header);
      if (op.method !== 'get' && op.method !== 'delete') req = req.set('content-type', 'application/json').send('{}');
      check(failures, `${op.method.toUpperCase()} ${op.path} with X-Project-Id ${header.slice(0, 20)}`, await req);
    }
  }
  expect([...new Set(failures)]).toEqual([]);
}, 120_000);
