import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
let auth: Record<string, string>;
/** Ids of the contacts that exist before any walk starts. */
const seeded = new Set<string>();
/** Every contact the project holds (seeded + inserted while walking). */
let existing = 0;
let liveCounter = 0;

const SEEDED = 260;

beforeAll(async () => {
  env = await startTestEnv();
  const p = await env.project('paging');
  auth = bearer(p.secretKey);
  const emails = Array.from({ length: SEEDED }, (_, i) => `seed-${String(i).padStart(3, '0')}@x.io`);
  for (let i = 0; i < emails.length; i += 26) {
    const created = await Promise.all(emails.slice(i, i + 26).map((email) => env.http().post('/contacts').set(auth).send({ email })));
    for (const res of created) {
      expect(res.status).toBe(201);
      seeded.add(res.body.id);
    }
  }
  existing = SEEDED;
});
afterAll(() => env.close());

const list = (q: Record<string, string | number>) => env.http().get('/contacts').query(q).set(auth);

async function insertLive(): Promise<void> {
  const res = await env.http().post('/contacts').set(auth).send({ email: `live-${liveCounter++}@x.io` });
  expect(res.status).toBe(201);
  existing++;
}

interface Page {
  data: { id: string; email: string }[];
  cursor: string | null;
  hasMore: boolean;
  total: number;
}

/**
 * Walks the whole list. With `concurrentInserts`, each later page is fetched while that many
 * new contacts are being created, so the keyset must hold up under concurrent writes.
 */
async function walk(opts: { limit?: number; search?: string; concurrentInserts?: number; expectedTotal: number }) {
  const q: Record<string, string | number> = {};
  if (opts.limit !== undefined) q.limit = opts.limit;
  if (opts.search !== undefined) q.search = opts.search;
  const pageSize = opts.limit ?? 20;
  const ids: string[] = [];
  const pages: Page[] = [];

  const first = await list(q);
  expect(first.status).toBe(200);
  let page: Page = first.body;
  expect(page.total).toBe(opts.expectedTotal);
  for (;;) {
    pages.push(page);
    ids.push(...page.data.map((c) => c.id));
    if (!page.hasMore) break;
    expect(page.data).toHaveLength(pageSize);
    expect(typeof page.cursor).toBe('string');
    const [res] = await Promise.all([
      list({ ...q, cursor: page.cursor! }),
      ...Array.from({ length: opts.concurrentInserts ?? 0 }, () => insertLive()),
    ]);
    expect(res.status).toBe(200);
    page = res.body;
    expect(page.total).toBe(0);
    if (pages.length > 1000) throw new Error('the walk does not end');
  }
  expect(page.cursor).toBeNull();
  expect(page.data.length).toBeLessThanOrEqual(pageSize);
  expect(new Set(ids).size).toBe(ids.length); // no duplicates
  return { ids, pages };
}

/** Every pre-existing contact was seen exactly once. */
function expectAllSeeded(ids: string[]) {
  const seen = ids.filter((id) => seeded.has(id));
  expect(seen).toHaveLength(seeded.size);
  expect(new Set(seen).size).toBe(seeded.size);
}

test.each([100, 99, 20, 7])('limit %i: every contact exactly once while contacts are being added', async (limit) => {
  const before = existing;
  const { ids, pages } = await walk({ limit, concurrentInserts: limit === 7 ? 2 : 1, expectedTotal: before });
  expectAllSeeded(ids);
  // everything that existed when the walk started, and nothing twice
  expect(ids.length).toBeGreaterThanOrEqual(before);
  expect(pages).toHaveLength(Math.ceil(ids.length / limit) || 1);
});

test('no limit: default page size 20', async () => {
  const { ids, pages } = await walk({ expectedTotal: existing });
  expect(pages[0]!.data).toHaveLength(20);
  expect(ids).toHaveLength(existing);
  expectAllSeeded(ids);
});

test('limit 1: one contact per page; a cursor keeps pointing at the same place while contacts are added', async () => {
  const total = existing;
  let res = await list({ limit: 1 });
  const afterFirst: string = res.body.cursor;
  const seen: string[] = [];
  for (let i = 0; i < 6; i++) {
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    expect(res.body.hasMore).toBe(true);
    expect(res.body.total).toBe(i === 0 ? total : 0);
    seen.push(res.body.data[0].id);
    const [next] = await Promise.all([list({ limit: 1, cursor: res.body.cursor }), insertLive()]);
    res = next;
  }
  expect(new Set(seen).size).toBe(6);
  // six contacts were added since; the first page's cursor still leads to the same contacts
  const replay = await list({ limit: 5, cursor: afterFirst });
  expect(replay.body.data.map((c: { id: string }) => c.id)).toEqual(seen.slice(1));
});

test('a search walks the same way, and total counts the matches only', async () => {
  // seed-100 … seed-199 contain "seed-1"
  const { ids, pages } = await walk({ limit: 30, search: 'SEED-1', concurrentInserts: 1, expectedTotal: 100 });
  expect(ids).toHaveLength(100);
  expect(pages.map((p) => p.data.length)).toEqual([30, 30, 30, 10]);
  for (const p of pages) for (const c of p.data) expect(c.email).toMatch(/^seed-1\d\d@x\.io$/);
});

test('limit outside 1..100 or not an integer → 422', async () => {
  for (const limit of [0, 101, -1, 1.5, 'abc', '']) {
    const res = await list({ limit });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', errors: [expect.objectContaining({ field: 'query.limit' })] });
  }
  expect((await list({ limit: 100 })).body.data).toHaveLength(100);
});

test('a cursor that is not one of ours → 400', async () => {
  const forged = [
    'garbage',
    '!!!',
    Buffer.from('not json').toString('base64url'),
    Buffer.from(JSON.stringify({ before: 'cnt_x' })).toString('base64url'),
    Buffer.from(JSON.stringify({ after: 42 })).toString('base64url'),
    Buffer.from('null').toString('base64url'),
  ];
  for (const cursor of forged) {
    const res = await list({ cursor });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'INVALID_CURSOR', statusCode: 400 } });
  }
});
