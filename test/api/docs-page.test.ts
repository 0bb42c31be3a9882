import { existsSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

const SWAGGER_UI_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));

/** Every URL the page loads through an attribute (scripts, styles, icons). */
const attributeUrls = (html: string) => [...html.matchAll(/\s(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);

test('GET /docs is an HTML page that loads Swagger UI from this server only, pointed at /openapi.json', async () => {
  const page = await env.http().get('/docs');
  expect(page.status).toBe(200);
  expect(page.headers['content-type']).toMatch(/^text\/html/);
  expect(page.text.startsWith('<!doctype html>')).toBe(true);
  expect(page.text).not.toMatch(/https?:\/\//);
  expect(page.text).toContain("url: '/openapi.json'");

  const assets = attributeUrls(page.text).filter((u) => u.startsWith('/docs/assets/'));
  expect(assets.map((u) => u.split('?')[0]).sort()).toEqual([
    '/docs/assets/favicon-32x32.png',
    '/docs/assets/swagger-ui-bundle.js',
    '/docs/assets/swagger-ui.css',
  ]);
  // Nothing else is loaded: the only other link is the document itself.
  expect(attributeUrls(page.text).filter((u) => !assets.includes(u))).toEqual(['/openapi.json']);

  const types: Record<string, RegExp> = { js: /^(text|application)\/javascript/, css: /^text\/css/, png: /^image\/png$/ };
  for (const url of assets) {
    const file = url.split('?')[0]!.slice('/docs/assets/'.length);
    const res = await env.http().get(url).buffer(true).parse((r, done) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => done(null, Buffer.concat(chunks)));
    });
    expect({ url, status: res.status }).toEqual({ url, status: 200 });
    expect({ url, type: res.headers['content-type'] }).toEqual({ url, type: expect.stringMatching(types[file.split('.').pop()!]!) });
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    // The installed package's own file, byte for byte.
    expect((res.body as Buffer).equals(readFileSync(path.join(SWAGGER_UI_DIR, file)))).toBe(true);
  }
});

test('the asset route serves the listed files only', async () => {
  for (const url of [
    '/docs/assets/package.json',
    '/docs/assets/index.html',
    '/docs/assets/swagger-ui.js',
    '/docs/assets/..%2Fpackage.json',
    '/docs/assets/%2E%2E%2F%2E%2E%2Fpackage.json',
  ]) {
    const res = await env.http().get(url);
    expect({ url, status: res.status, code: res.body?.error?.code }).toEqual({ url, status: 404, code: 'NOT_FOUND' });
  }
});

const CHROMIUM = '/usr/bin/chromium';

(existsSync(CHROMIUM) ? test : test.skip)('in a browser with no network beyond this server, /docs renders the guide and the operations', async () => {
  const server: Server = env.app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    const context = await browser.newContext();
    const elsewhere: string[] = [];
    // Anything not served by this server is refused and remembered: the page must not need it.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${origin}/`)) return route.continue();
      elsewhere.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));

    await page.goto(`${origin}/docs`);
    await page.locator('.info h1', { hasText: 'Getting started' }).waitFor();
    await page.locator('.info h1', { hasText: 'Template variables' }).waitFor();
    const send = page.locator('.opblock-summary', { hasText: '/v1/send' }).first();
    await send.waitFor();
    // Operations of other tags are rendered too (Swagger UI renders tags as they scroll into view).
    for (const path of ['/contacts/{id}', '/workflows/{id}/executions', '/docs/assets/{file}']) {
      // (Source text, not a function: this file is compiled without the DOM's types.)
      const selector = JSON.stringify(`.opblock-summary-path[data-path="${path}"]`);
      await page.waitForFunction(
        `document.querySelector(${selector}) !== null || (window.scrollBy(0, window.innerHeight), false)`,
        undefined,
        { polling: 100 },
      );
    }
    await page.evaluate('window.scrollTo(0, 0)');

    // Expanded, an operation shows its description, its headers and its examples.
    await send.click();
    const body = page.locator('#operations-Public_API-postV1Send');
    await body.getByText('Renders and queues one email per recipient').waitFor();
    await body.getByText('Idempotency-Key', { exact: true }).first().waitFor();
    await body.getByText('BILLING_LIMIT_EXCEEDED').first().waitFor();

    expect(errors).toEqual([]);
    expect(elsewhere).toEqual([]);
  } finally {
    await browser.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
