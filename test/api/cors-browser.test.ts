import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/** Low, so a page can run into the limit; each test below uses its own project, well under it otherwise. */
const RATE_LIMIT = 10;

let env: TestEnv;
let apiServer: http.Server;
let pageServer: http.Server;
let browser: Browser;
let page: Page;
/** Where the API listens. */
let api: string;
/** Where the calling page comes from: another host and another port than the API. */
let pageOrigin: string;

/** CI installs Debian's chromium; a machine without it must fail here, not skip the browser checks. */
function chromiumPath(): string {
  const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(path)) {
    throw new Error(`Chromium not found at ${path}: install it (apt-get install chromium) or point CHROMIUM_PATH at it`);
  }
  return path;
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function close(server: http.Server | undefined): Promise<void> {
  if (!server) return;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

beforeAll(async () => {
  const executablePath = chromiumPath();
  env = await startTestEnv({ RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT) });
  apiServer = http.createServer(env.app);
  api = `http://127.0.0.1:${await listen(apiServer)}`;
  pageServer = http.createServer((_req, res) => {
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.end('<!doctype html><title>A customer site</title><p>Signs people up.</p>');
  });
  pageOrigin = `http://localhost:${await listen(pageServer)}`;
  browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  page = await browser.newPage();
  await page.goto(`${pageOrigin}/`);
});

afterAll(async () => {
  await browser?.close();
  await close(pageServer);
  await close(apiServer);
  await env?.close();
});

interface Call {
  path: string;
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
  credentials?: 'omit' | 'same-origin' | 'include';
  /** Response headers the page tries to read (null when CORS hides them). */
  read?: string[];
}

type Outcome = { status: number; body: unknown; headers: Record<string, string | null> } | { error: string };

/** `fetch` run by the page, so the browser enforces CORS exactly as it would on a customer's site. */
function fromPage(call: Call): Promise<Outcome> {
  return page.evaluate(
    async ({ url, call: c }) => {
      try {
        const res = await fetch(url, {
          method: c.method ?? 'POST',
          headers: c.headers,
          body: c.body === undefined ? undefined : JSON.stringify(c.body),
          credentials: c.credentials ?? 'same-origin',
        });
        const headers: Record<string, string | null> = {};
        for (const name of c.read ?? []) headers[name] = res.headers.get(name);
        return { status: res.status, body: await res.json().catch(() => null), headers };
      } catch (err) {
        return { error: `${(err as Error).name}: ${(err as Error).message}` };
      }
    },
    { url: `${api}${call.path}`, call },
  );
}

const json = (key: string, extra: Record<string, string> = {}) => ({
  Authorization: `Bearer ${key}`,
  'Content-Type': 'application/json',
  ...extra,
});

async function eventsNamed(p: ProjectWithKeys, name: string): Promise<Array<{ id: string; email: string }>> {
  const res = await env.http().get('/events').query({ name, limit: 100 }).set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  return res.body.data;
}

const BLOCKED = { error: expect.stringMatching(/^TypeError: /) };

describe('from a page on another origin, in Chromium', () => {
  test('the page really is on another origin than the API', async () => {
    const origin = await page.evaluate<string>('location.origin');
    expect(origin).toBe(pageOrigin);
    expect(new URL(api).origin).not.toBe(origin);
  });

  test('POST /v1/track with the public key succeeds, the event is recorded, useful headers are readable', async () => {
    const p = await env.project();
    const call: Call = {
      path: '/v1/track',
      headers: json(p.publicKey, { 'Idempotency-Key': 'signup-from-page-1' }),
      body: { email: 'visitor@example.org', event: 'page-signup', data: { plan: 'free' } },
      read: ['X-Request-Id', 'Idempotent-Replayed', 'RateLimit-Limit', 'RateLimit-Remaining'],
    };
    const first = await fromPage(call);
    expect(first).toMatchObject({
      status: 200,
      body: { success: true, data: { contact: expect.stringMatching(/^cnt_/), event: expect.stringMatching(/^evt_/) } },
      headers: { 'Idempotent-Replayed': null, 'RateLimit-Limit': String(RATE_LIMIT), 'RateLimit-Remaining': String(RATE_LIMIT - 1) },
    });
    const tracked = first as { body: { data: { event: string } }; headers: Record<string, string | null> };
    expect(tracked.headers['X-Request-Id']).toMatch(/^[0-9a-f-]{36}$/);

    const events = await eventsNamed(p, 'page-signup');
    expect(events).toEqual([expect.objectContaining({ id: tracked.body.data.event, email: 'visitor@example.org' })]);

    // The Idempotency-Key header is allowed, and the page can tell a replay apart.
    const again = await fromPage(call);
    expect(again).toMatchObject({ status: 200, body: tracked.body, headers: { 'Idempotent-Replayed': 'true' } });
    expect(await eventsNamed(p, 'page-signup')).toHaveLength(1);
  });

  test('error replies of /v1/track are readable by the page: 401, 422 and 429 with Retry-After', async () => {
    const unknownKey = await fromPage({
      path: '/v1/track',
      headers: json(`pk_${'0'.repeat(64)}`),
      body: { email: 'a@example.org', event: 'x' },
      read: ['X-Request-Id'],
    });
    expect(unknownKey).toMatchObject({ status: 401, body: { error: { code: 'INVALID_API_KEY' } }, headers: { 'X-Request-Id': expect.any(String) } });

    const p = await env.project();
    // Rejected bodies still count against the limit, so the page runs into it without recording anything.
    let last: Outcome | undefined;
    for (let i = 0; i < 2 * RATE_LIMIT + 1; i++) {
      last = await fromPage({ path: '/v1/track', headers: json(p.publicKey), body: { event: 'no-email' }, read: ['Retry-After', 'RateLimit-Remaining'] });
      if (i === 0) expect(last).toMatchObject({ status: 422, body: { error: { code: 'VALIDATION_ERROR' } } });
      if ('status' in last && last.status === 429) break;
    }
    expect(last).toMatchObject({
      status: 429,
      body: { error: { code: 'RATE_LIMIT_EXCEEDED' } },
      headers: { 'Retry-After': expect.stringMatching(/^\d+$/), 'RateLimit-Remaining': '0' },
    });
  });

  test('credentialed requests are not honoured, even to /v1/track', async () => {
    const p = await env.project();
    const res = await fromPage({
      path: '/v1/track',
      headers: json(p.publicKey),
      body: { email: 'cookie@example.org', event: 'with-cookies' },
      credentials: 'include',
    });
    expect(res).toEqual(BLOCKED);
    expect(await eventsNamed(p, 'with-cookies')).toEqual([]);
  });

  test('secret-key routes cannot be called from the page, and nothing happens on the server', async () => {
    const p = await env.project();
    expect(await fromPage({ path: '/contacts', headers: json(p.secretKey), body: { email: 'stolen@example.org' } })).toEqual(BLOCKED);
    expect(await fromPage({ path: '/contacts', method: 'GET', headers: { Authorization: `Bearer ${p.secretKey}` } })).toEqual(BLOCKED);
    expect(
      await fromPage({
        path: '/v1/send',
        headers: json(p.secretKey),
        body: { to: 'someone@example.org', subject: 'Hi', body: '<p>Hi</p>', from: 'me@example.org' },
      }),
    ).toEqual(BLOCKED);
    // The dashboard alias of /v1/track takes the secret key: no CORS there either.
    expect(await fromPage({ path: '/events/track', headers: json(p.secretKey), body: { email: 'alias@example.org', event: 'via-alias' } })).toEqual(
      BLOCKED,
    );

    const contacts = await env.http().get('/contacts').set(bearer(p.secretKey));
    expect(contacts.status).toBe(200);
    expect(contacts.body.total).toBe(0);
    expect(await eventsNamed(p, 'via-alias')).toEqual([]);
  });
});

describe('the CORS headers themselves', () => {
  const preflight = (path: string) =>
    env
      .http()
      .options(path)
      .set('Origin', 'https://shop.example.com')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization,content-type,idempotency-key');

  test('the preflight of /v1/track is answered before authentication and rate limiting', async () => {
    const res = await preflight('/v1/track');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-methods']!.split(',').sort()).toEqual(['OPTIONS', 'POST']);
    expect(res.headers['access-control-allow-headers']!.toLowerCase().split(',').sort()).toEqual([
      'authorization',
      'content-type',
      'idempotency-key',
    ]);
    expect(Number(res.headers['access-control-max-age'])).toBeGreaterThanOrEqual(600);
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    expect(res.headers['ratelimit-limit']).toBeUndefined();
  });

  test('responses of /v1/track carry CORS headers, success and error alike, never Allow-Credentials', async () => {
    const p = await env.project();
    const ok = await env
      .http()
      .post('/v1/track')
      .set('Origin', 'https://shop.example.com')
      .set(bearer(p.publicKey))
      .send({ email: 'headers@example.org', event: 'headers' });
    const missingKey = await env.http().post('/v1/track').set('Origin', 'https://shop.example.com').send({});
    expect(ok.status).toBe(200);
    expect(missingKey.status).toBe(401);
    for (const res of [ok, missingKey]) {
      expect(res.headers['access-control-allow-origin']).toBe('*');
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      expect(res.headers['access-control-expose-headers']!.toLowerCase().split(',')).toEqual(
        expect.arrayContaining(['x-request-id', 'idempotent-replayed', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']),
      );
    }
  });

  test('secret-key routes send no CORS headers, preflight or not', async () => {
    const p = await env.project();
    for (const path of ['/v1/send', '/contacts', '/events/track']) {
      const res = await preflight(path);
      expect({ path, allowOrigin: res.headers['access-control-allow-origin'] }).toEqual({ path, allowOrigin: undefined });
    }
    const listed = await env.http().get('/contacts').set('Origin', 'https://shop.example.com').set(bearer(p.secretKey));
    expect(listed.status).toBe(200);
    expect(listed.headers['access-control-allow-origin']).toBeUndefined();
  });

  test('the preflight is not an operation of the OpenAPI document', async () => {
    const doc = await env.http().get('/openapi.json');
    expect(Object.keys(doc.body.paths['/v1/track'])).toEqual(['post']);
  });
});
