import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { RouteRegistry } from '../../api/routing';
import { registerWebAppRoutes } from '../../api/routes/web-app';
import { webAppDir } from '../../api/web-app';
import { authenticate, requestScope } from '../../api/middleware/auth';
import { errorHandler, notFoundHandler } from '../../api/middleware/errors';
import { rateLimit } from '../../api/middleware/rate-limit';
import { startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(async () => {
  await env?.close();
});

test('every path under /app answers the app page, uncached, so links into it and reloads work', async () => {
  for (const url of ['/app', '/app/', '/app/p/prj_1/contacts', '/app/signin?next=x']) {
    const res = await request(env.app).get(url).expect(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.text).toContain('<div id="root">');
  }
});

test("the build's assets are served for a year; a missing one is a 404 in the error envelope", async () => {
  const index = readFileSync(path.join(webAppDir(), 'index.html'), 'utf8');
  const script = /src="\/app\/assets\/([^"]+\.js)"/.exec(index)![1]!;
  const res = await request(env.app).get(`/app/assets/${script}`).expect(200);
  expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
  expect(res.headers['content-type']).toMatch(/javascript/);

  const missing = await request(env.app).get('/app/assets/nope.js').expect(404);
  expect(missing.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
  await request(env.app).get('/app/assets/..%2Fpackage.json').expect(404);
});

test('without a build, /app says how to make one (503) instead of an empty page', async () => {
  const { deps } = env;
  const registry = new RouteRegistry(express.Router(), {
    scope: requestScope(deps.orm),
    authenticate: authenticate(deps.sessionSecret, deps.keys),
    rateLimit: rateLimit(deps.rateLimiter),
  });
  registerWebAppRoutes(registry, mkdtempSync(path.join(tmpdir(), 'no-web-')));
  const app = express().use(registry.router).use(notFoundHandler).use(errorHandler);
  const res = await request(app).get('/app/p/prj_1/setup').expect(503);
  expect(res.text).toContain('npm run build');
});
