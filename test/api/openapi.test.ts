import { execFile } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import type { Express } from 'express';
import request from 'supertest';
import { createApp } from '../../api/app';
import { templateVariables } from '../../mail/render';
import { createTestUser } from '../helpers/accounts';
import { startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

/** The parts of Express 5 (router 2.x) layers this test reads. */
interface Layer {
  name: string;
  /** True for a layer mounted at `/` with `app.use(...)` (no path prefix). */
  slash: boolean;
  handle: unknown;
  route?: { path: string | string[]; methods: Record<string, boolean>; stack: Layer[] };
}

interface Operation {
  method: string;
  path: string;
  /** A JSON body parser sits in the route's own chain. */
  parsesBody: boolean;
}

/**
 * Every route actually served by the app, read from the router stack (not from the registry
 * the document is generated from). Nested routers are followed only when mounted at `/`;
 * a router mounted under a prefix would make the paths below wrong, so it fails the test.
 */
function servedOperations(app: Express): Operation[] {
  const out: Operation[] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        const paths = Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
        for (const path of paths) {
          for (const [method, on] of Object.entries(layer.route.methods)) {
            if (!on) continue;
            expect(method).not.toBe('_all');
            out.push({ method, path, parsesBody: layer.route.stack.some((l) => l.name === 'jsonParser') });
          }
        }
      } else if (Array.isArray((layer.handle as { stack?: unknown }).stack)) {
        expect({ router: layer.name, mountedAtRoot: layer.slash }).toEqual({ router: layer.name, mountedAtRoot: true });
        walk((layer.handle as { stack: Layer[] }).stack);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return out;
}

const toOpenApi = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const key = (method: string, path: string) => `${method.toUpperCase()} ${path}`;

type Doc = {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

test('GET /openapi.json is OpenAPI 3.1.0 and needs no credentials', async () => {
  const res = await env.http().get('/openapi.json');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const doc = res.body as Doc;
  expect(doc.openapi).toBe('3.1.0');
  expect(doc.info.title).toEqual(expect.any(String));
  expect(doc.info.version).toEqual(expect.any(String));
  expect(doc.components.schemas.Error).toBeDefined();
  expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['publicKey', 'secretKey', 'session']);
});

test('the document lists exactly the routes the app serves, each with a summary, bodies where parsed', async () => {
  const { app, registry } = createApp(env.deps);
  // The registry's router is mounted on the app with app.use(registry.router).
  const appStack = (app as unknown as { router: { stack: Layer[] } }).router.stack;
  expect(appStack.filter((l) => l.handle === registry.router)).toHaveLength(1);

  const all = servedOperations(app);
  // CORS preflights are browser plumbing, not operations: one per route marked `cors`, and no other OPTIONS.
  const preflights = all.filter((o) => o.method === 'options').map((o) => o.path);
  expect(preflights.sort()).toEqual(registry.routes.filter((r) => r.cors).map((r) => r.path).sort());
  const served = all.filter((o) => o.method !== 'options');
  expect(served.length).toBeGreaterThanOrEqual(12);
  // Spot-check that the walk found what we know exists (guards against an empty or wrong walk).
  const servedKeys = served.map((o) => key(o.method, toOpenApi(o.path)));
  expect(servedKeys).toEqual(
    expect.arrayContaining([
      'GET /contacts', 'POST /contacts', 'GET /contacts/{id}', 'PATCH /contacts/{id}', 'GET /health', 'GET /openapi.json', 'GET /docs',
      'GET /docs/assets/{file}', 'GET /',
    ]),
  );
  expect(new Set(servedKeys).size).toBe(servedKeys.length);

  const doc = (await request(app).get('/openapi.json').expect(200)).body as Doc;
  const documented: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const method of Object.keys(ops)) documented.push(key(method, path));
  }
  expect([...documented].sort()).toEqual([...servedKeys].sort());

  for (const op of served) {
    const path = toOpenApi(op.path);
    const operation = doc.paths[path]![op.method]!;
    const label = key(op.method, path);
    expect({ label, summary: typeof operation.summary === 'string' && operation.summary.trim().length > 0 }).toEqual({
      label,
      summary: true,
    });
    const body = operation.requestBody as { content?: Record<string, { schema?: Record<string, unknown> }> } | undefined;
    const schema = body?.content?.['application/json']?.schema;
    expect({ label, hasBodySchema: schema !== undefined && Object.keys(schema).length > 0 }).toEqual({
      label,
      hasBodySchema: op.parsesBody,
    });
    // Path parameters in the URL are declared as parameters.
    const declared = ((operation.parameters ?? []) as Array<{ name: string; in: string; required: boolean }>)
      .filter((p) => p.in === 'path')
      .map((p) => [p.name, p.required]);
    const inUrl = [...op.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => [m[1], true]);
    expect({ label, params: declared.sort() }).toEqual({ label, params: inUrl.sort() });
  }

  // A known body-taking route: the schema really describes its body.
  const createContact = doc.paths['/contacts']!.post!.requestBody as {
    content: { 'application/json': { schema: { properties: Record<string, unknown>; required: string[] } } };
  };
  expect(createContact.content['application/json'].schema.required).toEqual(['email']);
  expect(Object.keys(createContact.content['application/json'].schema.properties).sort()).toEqual(['data', 'email', 'subscribed']);
});

test('declared security matches what the server enforces, with matching error responses', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  let secured = 0;
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const label = key(method, path);
      const security = op.security as Array<Record<string, unknown>>;
      const responses = Object.keys(op.responses as Record<string, unknown>);
      const needsKey = security.length > 0;
      if (needsKey) secured++;
      // Every secured operation accepts the secret key (spec: secret keys work everywhere), except
      // the ones that belong to a signed-in user rather than a project (the user, their project
      // list): those take the session only.
      const userOwned = /^\/(users\/@me(\/projects)?$|auth\/)/.test(path);
      if (needsKey && userOwned) expect({ label, security }).toEqual({ label, security: [{ session: [] }] });
      if (needsKey && !userOwned) expect({ label, secretKey: security.some((s) => 'secretKey' in s) }).toEqual({ label, secretKey: true });
      expect({
        label,
        has401: responses.includes('401'),
        has403: responses.includes('403'),
        has429: responses.includes('429'),
      }).toEqual({ label, has401: needsKey, has403: needsKey, has429: needsKey });
      // Errors that come from the body parser are listed only where there is a body.
      const hasBody = op.requestBody !== undefined;
      expect({ label, has400: responses.includes('400'), has413: responses.includes('413') }).toEqual({
        label,
        has400: hasBody,
        has413: hasBody,
      });

      // The server agrees: without a key, secured operations answer 401 MISSING_AUTH and open
      // ones do not ask for a key. (Open non-GET operations are not called: they may act.)
      if (!needsKey && method !== 'get') continue;
      const url = path.replace(/\{[^}]+\}/g, 'x');
      const res = await request(env.app)[method as 'get' | 'post' | 'patch' | 'put' | 'delete'](url).send(hasBody ? {} : undefined);
      expect({ label, status: res.status === 401 ? res.body.error.code : 'not 401' }).toEqual({
        label,
        status: needsKey ? 'MISSING_AUTH' : 'not 401',
      });
    }
  }
  expect(secured).toBeGreaterThan(0);
});

test('every $ref in the document resolves to a component', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as { components: Record<string, Record<string, unknown>> };
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]!);
  expect(refs.length).toBeGreaterThan(0);
  for (const ref of new Set(refs)) {
    const match = /^#\/components\/(schemas|parameters|headers|responses)\/([^/]+)$/.exec(ref);
    expect({ ref, resolvable: match !== null }).toEqual({ ref, resolvable: true });
    const target = doc.components[match![1]!]?.[match![2]!] as { $ref?: string } | undefined;
    expect({ ref, found: target !== undefined }).toEqual({ ref, found: true });
    expect(target!.$ref).toBeUndefined();
  }
});

/** Runs the validator in its own Node process: it is an ES module, which jest's CommonJS runtime cannot load. */
async function validateOpenApi(doc: unknown): Promise<{ valid: boolean; errors?: unknown }> {
  const validator = pathToFileURL(require.resolve('@seriousme/openapi-schema-validator')).href;
  const script = `
    import { readFileSync } from 'node:fs';
    const { Validator } = await import(${JSON.stringify(validator)});
    const result = await new Validator().validate(JSON.parse(readFileSync(0, 'utf8')));
    process.stdout.write(JSON.stringify({ valid: result.valid, errors: result.errors }));`;
  const output = await new Promise<string>((resolve, reject) => {
    const child = execFile(process.execPath, ['--input-type=module', '-e', script], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout) =>
      err ? reject(err) : resolve(stdout),
    );
    child.stdin!.end(JSON.stringify(doc));
  });
  return JSON.parse(output) as { valid: boolean; errors?: unknown };
}

test('the document is valid OpenAPI 3.1 (checked against the official schema)', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  expect(await validateOpenApi(doc)).toEqual({ valid: true });

  // The validator does find mistakes: the same document with a parameter in a place OpenAPI has not.
  const broken = structuredClone(doc);
  const parameters = broken.paths['/contacts/{id}']!.get!.parameters as Array<Record<string, unknown>>;
  parameters[0]!.in = 'body';
  expect((await validateOpenApi(broken)).valid).toBe(false);
});

test('operation ids are unique', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId as string));
  expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
  expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
});

type Parameter = { $ref?: string; name?: string; in?: string };

test('X-Project-Id is a header parameter exactly where a session names its project by header', async () => {
  const { registry } = createApp(env.deps);
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc & {
    components: { parameters: Record<string, { name: string; in: string; required: boolean; description: string }> };
  };
  expect(doc.components.parameters.ProjectId).toMatchObject({ name: 'X-Project-Id', in: 'header', required: false });
  expect(doc.components.parameters.ProjectId!.description).toMatch(/required with a session cookie, ignored with a key/i);
  let withHeader = 0;
  for (const route of registry.routes) {
    const label = key(route.method, toOpenApi(route.path));
    const parameters = (doc.paths[toOpenApi(route.path)]![route.method]!.parameters ?? []) as Parameter[];
    const expected = (route.auth === 'secret' || route.auth === 'publicOrSecret') && route.projectParam === undefined;
    if (expected) withHeader++;
    expect({ label, projectHeader: parameters.some((p) => p.$ref === '#/components/parameters/ProjectId') }).toEqual({
      label,
      projectHeader: expected,
    });
  }
  expect(withHeader).toBeGreaterThan(50);

  // The server agrees: signed in without the header, a documented route asks for it.
  const { cookie } = await createTestUser(env);
  const res = await env.http().get('/contacts').set('Cookie', cookie);
  expect({ status: res.status, message: res.body.error.message }).toEqual({ status: 400, message: expect.stringContaining('X-Project-Id') });
});

test('Idempotency-Key is documented on the routes that read it, and they do', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc & {
    components: { parameters: Record<string, { name: string; in: string; schema: Record<string, unknown> }> };
  };
  expect(doc.components.parameters.IdempotencyKey).toMatchObject({ name: 'Idempotency-Key', in: 'header', schema: { minLength: 1, maxLength: 255 } });
  const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([, op]) => ((op.parameters ?? []) as Parameter[]).some((p) => p.$ref === '#/components/parameters/IdempotencyKey'))
      .map(([method]) => key(method, path)),
  );
  expect(documented.sort()).toEqual(['POST /events/track', 'POST /v1/send', 'POST /v1/track']);
  for (const label of documented) {
    const [method, path] = label.split(' ') as [string, string];
    const op = doc.paths[path]![method.toLowerCase()]!;
    const responses = op.responses as Record<string, { headers?: Record<string, unknown> }>;
    expect(Object.keys(responses['200']!.headers ?? {})).toContain('Idempotent-Replayed');
    expect(responses['409']).toBeDefined();
  }

  // Each of them reads the header: a key with a space in it is refused by name.
  const p = await env.project();
  const bodies: Record<string, object> = {
    'POST /v1/send': { to: 'a@example.org', from: 'me@example.com', subject: 'S', body: 'B' },
    'POST /v1/track': { email: 'a@example.org', event: 'e' },
    'POST /events/track': { email: 'a@example.org', event: 'e' },
  };
  for (const label of documented) {
    const res = await env
      .http()
      .post(label.split(' ')[1]!)
      .set('Authorization', `Bearer ${p.secretKey}`)
      .set('Idempotency-Key', 'not valid')
      .send(bodies[label]);
    expect({ label, status: res.status, field: res.body.error?.errors?.[0]?.field }).toEqual({ label, status: 422, field: 'Idempotency-Key' });
  }
});

test('402 BILLING_LIMIT_EXCEEDED is documented on the routes that send under a cap; 429 and successes name their headers', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  const with402: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const responses = op.responses as Record<string, { $ref?: string; headers?: Record<string, unknown>; content?: Record<string, { example?: { error: { code: string; statusCode: number } } }> }>;
      if (responses['402']) {
        with402.push(key(method, path));
        expect(responses['402'].content!['application/json']!.example!.error).toMatchObject({ code: 'BILLING_LIMIT_EXCEEDED', statusCode: 402 });
      }
      if ((op.security as unknown[]).length > 0) {
        const success = Object.entries(responses).find(([status]) => status.startsWith('2'))![1];
        expect({ op: key(method, path), headers: Object.keys(success.headers ?? {}) }).toEqual({
          op: key(method, path),
          headers: expect.arrayContaining(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']),
        });
      }
    }
  }
  expect(with402.sort()).toEqual(['POST /campaigns/{id}/send', 'POST /campaigns/{id}/test', 'POST /templates/{id}/test', 'POST /v1/send']);
  const rateLimited = (doc as unknown as { components: { responses: Record<string, { headers: Record<string, unknown> }> } }).components.responses
    .RateLimited!;
  expect(Object.keys(rateLimited.headers).sort()).toEqual(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']);
});

test('examples: the public endpoints have request and response examples, and every example passes its schema', async () => {
  const { registry } = createApp(env.deps);
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  for (const path of ['/v1/send', '/v1/track', '/v1/verify']) {
    const op = doc.paths[path]!.post! as {
      requestBody: { content: { 'application/json': { examples?: Record<string, { value: unknown }> } } };
      responses: Record<string, { content?: { 'application/json': { examples?: Record<string, { value: unknown }> } } }>;
    };
    expect({ path, request: Object.keys(op.requestBody.content['application/json'].examples ?? {}).length > 0 }).toEqual({ path, request: true });
    expect({ path, response: Object.keys(op.responses['200']!.content!['application/json'].examples ?? {}).length > 0 }).toEqual({
      path,
      response: true,
    });
  }
  let checked = 0;
  for (const route of registry.routes) {
    for (const [name, example] of Object.entries(route.examples?.request ?? {})) {
      const result = route.body!.safeParse(example.value);
      expect({ route: route.path, name, issues: result.success ? [] : result.error.issues }).toEqual({ route: route.path, name, issues: [] });
      checked++;
    }
    for (const [name, example] of Object.entries(route.examples?.response ?? {})) {
      const result = route.response!.safeParse(example.value);
      expect({ route: route.path, name, issues: result.success ? [] : result.error.issues }).toEqual({ route: route.path, name, issues: [] });
      checked++;
    }
  }
  expect(checked).toBeGreaterThanOrEqual(6);
});

test('schemas read well: no zod regex next to a format, no ±2^53 integer bounds', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  const offenders: string[] = [];
  const walk = (node: unknown, where: string) => {
    if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${where}/${i}`));
    else if (node && typeof node === 'object') {
      const schema = node as Record<string, unknown>;
      if (typeof schema.format === 'string' && 'pattern' in schema) offenders.push(`${where}: pattern next to format ${schema.format}`);
      if (Math.abs(Number(schema.minimum)) === Number.MAX_SAFE_INTEGER || Math.abs(Number(schema.maximum)) === Number.MAX_SAFE_INTEGER) {
        offenders.push(`${where}: safe-integer bound`);
      }
      for (const [k, v] of Object.entries(schema)) walk(v, `${where}/${k}`);
    }
  };
  walk(doc, '#');
  expect(offenders).toEqual([]);
  // Emails are still typed as emails.
  const body = doc.paths['/contacts']!.post!.requestBody as { content: { 'application/json': { schema: { properties: { email: unknown } } } } };
  expect(body.content['application/json'].schema.properties.email).toMatchObject({ type: 'string', format: 'email' });
});

test('`from` on /v1/send says when it is required', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  const body = doc.paths['/v1/send']!.post!.requestBody as {
    content: { 'application/json': { schema: { required?: string[]; properties: { from: { description?: string } } } } };
  };
  const schema = body.content['application/json'].schema;
  expect(schema.required ?? []).not.toContain('from');
  expect(schema.properties.from.description).toMatch(/Required unless `template` is given and that template has a sender/);
});

test('info.description is a getting-started guide that matches this server and the code', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc & { info: { description: string } };
  const text = doc.info.description;
  for (const heading of ['# Getting started', '## Keys', '## Your first email', '## Official Node client', '## Errors', '## Pagination', '## Rate limits', '## Idempotency', '# Template variables']) {
    expect(text).toContain(`\n${heading}\n`);
  }
  // This server's PUBLIC_URL and rate limit (startTestEnv: http://localhost:3000, the default 1000).
  expect(text).toContain('curl -H \'Authorization: Bearer sk_…\'');
  expect(text).toContain('http://localhost:3000/v1/send');
  expect(text).toContain('1000 requests per minute');
  // The client's baseUrl as test/api/plunk-client.test.ts configures it: ending in /v1/.
  expect(text).toContain("new Plunk('sk_…', { baseUrl: 'http://localhost:3000/v1/' })");
  // Every variable a template really gets is named.
  const vars = templateVariables(
    { id: 'cnt_1', email: 'a@example.org', subscribed: true, data: {} },
    { unsubscribeUrl: 'u', subscribeUrl: 's', manageUrl: 'm' },
  );
  for (const name of Object.keys(vars)) expect(text).toContain(name === 'data' ? '{{data.' : `{{${name}}}`);
  expect(text).toContain('{{key ?? "fallback"}}');
  // Tags: the main resources are described.
  const tags = (doc as unknown as { tags: Array<{ name: string; description?: string }> }).tags;
  for (const name of ['Public API', 'Contacts', 'Domains', 'Templates', 'Events', 'Campaigns', 'Segments', 'Workflows']) {
    expect({ name, described: (tags.find((t) => t.name === name)?.description ?? '').length > 20 }).toEqual({ name, described: true });
  }
});

test('the public endpoints and the main resources carry operation descriptions', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as Doc;
  for (const op of ['POST /v1/send', 'POST /v1/track', 'POST /v1/verify', 'POST /contacts', 'POST /domains', 'POST /templates', 'GET /events', 'POST /campaigns', 'POST /campaigns/{id}/send', 'POST /segments', 'POST /workflows']) {
    const [method, path] = op.split(' ') as [string, string];
    const description = doc.paths[path]![method.toLowerCase()]!.description;
    expect({ op, described: typeof description === 'string' && description.length > 80 }).toEqual({ op, described: true });
  }
});
