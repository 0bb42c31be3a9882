import type { Response } from 'supertest';
import { RateLimiter } from '../../api/middleware/rate-limit';
import { loadConfig } from '../../config';
import { queryOne } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

const LIMIT = 5;

/** The time both API processes read (their clocks agree, as NTP keeps servers' clocks). */
let now = Date.parse('2030-01-01T10:00:05Z');
const clock = () => new Date(now);

/** Two app instances over one database: two API processes behind a load balancer. */
let a: TestEnv;
let b: TestEnv;
beforeAll(async () => {
  [a, b] = await Promise.all([
    startTestEnv({ RATE_LIMIT_PER_MINUTE: String(LIMIT) }, { clock }),
    startTestEnv({ RATE_LIMIT_PER_MINUTE: String(LIMIT) }, { clock }),
  ]);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

/** The next minute, five seconds in: a window no request has counted in yet. */
function freshWindow(): void {
  now += 60_000;
}

function expectRateHeaders(res: Response, remaining: number): void {
  expect(res.headers['ratelimit-limit']).toBe(String(LIMIT));
  expect(res.headers['ratelimit-remaining']).toBe(String(remaining));
  expect(res.headers['ratelimit-reset']).toMatch(/^\d+$/);
  const reset = Number(res.headers['ratelimit-reset']);
  expect(reset).toBeGreaterThanOrEqual(1);
  expect(reset).toBeLessThanOrEqual(60);
}

function expectLimited(res: Response): void {
  expect(res.status).toBe(429);
  expect(res.body).toMatchObject({
    success: false,
    error: { code: 'RATE_LIMIT_EXCEEDED', statusCode: 429, requestId: res.headers['x-request-id'] },
  });
  expect(res.body.message).toBe(res.body.error.message);
  expect(res.body.error.suggestion).toEqual(expect.any(String));
  expect(res.body.error.suggestion.length).toBeGreaterThan(0);
  expect(Number.isNaN(Date.parse(res.body.timestamp))).toBe(false);
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expectRateHeaders(res, 0);
  expect(res.headers['ratelimit-reset']).toBe(res.headers['retry-after']);
}

test('the default limit is 1000 requests per minute', () => {
  expect(loadConfig({}).rateLimitPerMinute).toBe(1000);
  expect(loadConfig({ RATE_LIMIT_PER_MINUTE: '5' }).rateLimitPerMinute).toBe(5);
  expect(() => loadConfig({ RATE_LIMIT_PER_MINUTE: '0' })).toThrow(/RATE_LIMIT_PER_MINUTE/);
});

test('requests 1..5 pass with RateLimit headers counting down; the 6th gets 429; other projects unaffected', async () => {
  const p = await a.project();
  const other = await a.project();
  freshWindow();

  for (let i = 1; i <= LIMIT; i++) {
    const res = await a.http().get('/contacts').set(bearer(p.secretKey));
    expect({ request: i, status: res.status }).toEqual({ request: i, status: 200 });
    expectRateHeaders(res, LIMIT - i);
  }
  const sixth = await a.http().get('/contacts').set(bearer(p.secretKey));
  expectLimited(sixth);
  // Every route with a key counts against the same limit, including writes.
  expectLimited(await a.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'late@x.io' }));

  const fresh = await a.http().get('/contacts').set(bearer(other.secretKey));
  expect(fresh.status).toBe(200);
  expectRateHeaders(fresh, LIMIT - 1);
});

test('refused requests are not executed', async () => {
  const p = await a.project();
  freshWindow();
  for (let i = 1; i <= LIMIT; i++) {
    expect((await a.http().get('/contacts/fields').set(bearer(p.secretKey))).status).toBe(200);
  }
  expectLimited(await a.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'refused@x.io' }));
  const row = await queryOne<{ n: number }>(a.orm.em.fork(), 'select count(*)::int as n from contacts where project_id = ?', [p.id]);
  expect(row!.n).toBe(0);
});

test('requests without a valid key are not counted, and unauthenticated routes are not limited', async () => {
  const p = await a.project();
  freshWindow();
  for (let i = 0; i < LIMIT + 2; i++) {
    expect((await a.http().get('/health')).status).toBe(200);
    expect((await a.http().get('/contacts').set(bearer(p.publicKey))).status).toBe(401);
  }
  expect((await a.http().get('/health')).headers['ratelimit-limit']).toBeUndefined();
  const res = await a.http().get('/contacts').set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  expectRateHeaders(res, LIMIT - 1);
});

test('two API processes share one count per project: 3 via A, then B allows only the 4th and 5th', async () => {
  const p = await a.project();
  freshWindow();
  for (let i = 1; i <= 3; i++) {
    const res = await a.http().get('/contacts').set(bearer(p.secretKey));
    expect(res.status).toBe(200);
    expectRateHeaders(res, LIMIT - i);
  }
  for (let i = 4; i <= LIMIT; i++) {
    const res = await b.http().get('/contacts').set(bearer(p.secretKey));
    expect({ request: i, status: res.status }).toEqual({ request: i, status: 200 });
    expectRateHeaders(res, LIMIT - i);
  }
  expectLimited(await b.http().get('/contacts').set(bearer(p.secretKey)));
  expectLimited(await a.http().get('/contacts').set(bearer(p.secretKey)));
});

test('a concurrent burst of 20 split over both processes gets exactly 5 successes', async () => {
  const p = await a.project();
  freshWindow();
  const burst = await Promise.all(
    Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).http().get('/contacts').set(bearer(p.secretKey))),
  );
  const statuses = burst.map((r) => r.status);
  expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT);
  expect(statuses.filter((s) => s === 429)).toHaveLength(20 - LIMIT);
  // Each success saw a distinct position in the count: remaining 4, 3, 2, 1, 0 once each.
  const remaining = burst.filter((r) => r.status === 200).map((r) => Number(r.headers['ratelimit-remaining']));
  expect(remaining.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4]);
  for (const r of burst.filter((res) => res.status === 429)) expectLimited(r);
});

test('an earlier window does not count against the current one', async () => {
  const p = await a.project();
  freshWindow();
  // The previous minute is far over the limit (as if the project had been hammering the API).
  await queryOne(
    a.orm.em.fork(),
    `insert into rate_limit_windows (project_id, window_start, count)
     values (?, date_trunc('minute', ?::timestamptz) - interval '1 minute', 1000)`,
    [p.id, clock()],
  );
  const res = await a.http().get('/contacts').set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  expectRateHeaders(res, LIMIT - 1);
});

test('a refused client is told to wait until the minute ends, and is served again then', async () => {
  const p = await a.project();
  freshWindow();
  for (let i = 1; i <= LIMIT; i++) expect((await a.http().get('/contacts').set(bearer(p.secretKey))).status).toBe(200);
  now += 20_000;
  const refused = await a.http().get('/contacts').set(bearer(p.secretKey));
  expectLimited(refused);
  expect(refused.headers['retry-after']).toBe('35');

  now += 34_000;
  expectLimited(await a.http().get('/contacts').set(bearer(p.secretKey)));
  now += 1_000;
  const served = await a.http().get('/contacts').set(bearer(p.secretKey));
  expect(served.status).toBe(200);
  expectRateHeaders(served, LIMIT - 1);
  expect(served.headers['ratelimit-reset']).toBe('60');
});

describe('RateLimiter: places taken in blocks, never past the limit', () => {
  const dbCount = async (bucket: string) =>
    (await queryOne<{ n: number }>(
      a.orm.em.fork(),
      `select coalesce(sum(count), 0)::int as n from rate_limit_windows where project_id = ? and window_start = date_trunc('minute', ?::timestamptz)`,
      [bucket, clock()],
    ))!.n;

  test("far from the limit a process takes a sixteenth of what is left, and hands it out without counting again", async () => {
    freshWindow();
    const limiter = new RateLimiter(a.orm, 1600, clock);
    const bucket = `blocks-${now}`;
    expect(await limiter.place(bucket)).toEqual({ count: 1, resetSeconds: 60 - (Math.floor(now / 1000) % 60) });
    expect(await dbCount(bucket)).toBe(100);
    for (let i = 2; i <= 100; i++) expect((await limiter.place(bucket)).count).toBe(i);
    expect(await dbCount(bucket)).toBe(100);
    // The next block is a sixteenth of the 1,500 left.
    expect((await limiter.place(bucket)).count).toBe(101);
    expect(await dbCount(bucket)).toBe(193);
    // A new window starts over.
    freshWindow();
    expect((await limiter.place(bucket)).count).toBe(1);
  });

  test('two processes sharing a window near its limit: every place once, exactly the limit admitted, every request counted', async () => {
    freshWindow();
    const limit = 64;
    const bucket = `shared-${now}`;
    const limiters = [new RateLimiter(a.orm, limit, clock), new RateLimiter(b.orm, limit, clock)];
    const places = await Promise.all(Array.from({ length: 200 }, (_, i) => limiters[i % 2]!.place(bucket)));
    const counts = places.map((p) => p.count).sort((x, y) => x - y);
    expect(new Set(counts).size).toBe(200);
    expect(counts.filter((c) => c <= limit)).toEqual(Array.from({ length: limit }, (_, i) => i + 1));
    // Blocks taken and not yet handed out are all a process can hold past the requests it answered.
    const held = (await dbCount(bucket)) - 200;
    expect(held).toBeGreaterThanOrEqual(0);
    expect(held).toBeLessThanOrEqual(2 * Math.floor(limit / 16));
  });
});
