import type { Express } from 'express';
import request from 'supertest';
import { createApp } from '../api/app';
import { startTestEnv, type TestEnv } from './helpers/env';

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

  const served = servedOperations(app);
  expect(served.length).toBeGreaterThanOrEqual(12);
  // Spot-check that the walk found what we know exists (guards against an empty or wrong walk).
  const servedKeys = served.map((o) => key(o.method, toOpenApi(o.path)));
  expect(servedKeys).toEqual(
    expect.arrayContaining(['GET /contacts', 'POST /contacts', 'GET /contacts/{id}', 'PATCH /contacts/{id}', 'GET /health', 'GET /openapi.json', 'GET /docs']),
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
      // the ones that belong to a signed-in user rather than a project: those take the session only.
      const userOwned = /^\/(users\/@me|auth\/)/.test(path);
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

test('GET /docs returns an HTML page listing every documented path', async () => {
  const [docRes, page] = await Promise.all([env.http().get('/openapi.json'), env.http().get('/docs')]);
  expect(page.status).toBe(200);
  expect(page.headers['content-type']).toMatch(/^text\/html/);
  expect(page.text.startsWith('<!doctype html>')).toBe(true);
  const doc = docRes.body as Doc;
  for (const [path, ops] of Object.entries(doc.paths)) {
    expect(page.text).toContain(`<code>${path}</code>`);
    for (const method of Object.keys(ops)) {
      expect(page.text).toContain(`<span class="m ${method}">${method.toUpperCase()}</span> <code>${path}</code>`);
    }
  }
  // Self-contained: nothing loaded from elsewhere.
  expect(page.text).not.toMatch(/<script[^>]+src=|<link[^>]+href=/i);
});

test('every $ref in the document resolves to a component schema', async () => {
  const doc = (await env.http().get('/openapi.json').expect(200)).body as { components: { schemas: Record<string, unknown> } };
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]!);
  expect(refs.length).toBeGreaterThan(0);
  for (const ref of new Set(refs)) {
    expect(ref).toMatch(/^#\/components\/schemas\//);
    const schema = doc.components.schemas[ref.slice('#/components/schemas/'.length)] as { $ref?: string } | undefined;
    expect(schema).toBeDefined();
    expect(schema!.$ref).toBeUndefined();
  }
});
