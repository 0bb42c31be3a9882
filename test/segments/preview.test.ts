import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * POST /segments/preview, which the segment editor calls while a condition is typed: the count and
 * the newest members of an unsaved condition, by the query a saved segment is counted with.
 */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

const post = (url: string, body: object, p = project) => env.http().post(url).set(bearer(p.secretKey)).send(body);
const preview = (body: object, p = project) => post('/segments/preview', body, p);

async function contact(email: string, data: Record<string, unknown>, p = project): Promise<string> {
  const res = await post('/contacts', { email, data, subscribed: true }, p);
  expect([200, 201]).toContain(res.status);
  return res.body.id as string;
}

const pro = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };

beforeAll(async () => {
  env = await startTestEnv();
  [project, other] = await Promise.all([env.project('segment preview'), env.project('segment preview other')]);
  // Created one after the other: ids grow, so "newest first" is the reverse of this order.
  for (const [email, data] of [
    ['p1@example.org', { plan: 'pro', age: 41 }],
    ['p2@example.org', { plan: 'PRO', age: 29 }],
    ['f1@example.org', { plan: 'free', age: 35 }],
    ['p3@example.org', { plan: 'pro' }],
  ] as const) {
    await contact(email, data);
  }
  await contact('p9@example.org', { plan: 'pro' }, other);
});

afterAll(() => env?.close());

test("counts an unsaved condition and lists its newest members; the count is what saving it stores", async () => {
  const res = await preview({ condition: pro, limit: 2 });
  expect(res.status).toBe(200);
  expect(res.body.count).toBe(3);
  expect(res.body.sample.map((c: { email: string }) => c.email)).toEqual(['p3@example.org', 'p2@example.org']);
  expect(res.body.sample[0]).toEqual({
    id: expect.stringMatching(/^cnt_/),
    email: 'p3@example.org',
    subscribed: true,
    data: { plan: 'pro' },
    createdAt: expect.any(String),
    updatedAt: expect.any(String),
  });

  const saved = await post('/segments', { name: 'Pro', condition: pro });
  expect(saved.status).toBe(201);
  expect(saved.body.memberCount).toBe(res.body.count);

  // Nested OR, a lone filter, the default sample size.
  const either = await preview({
    condition: {
      logic: 'OR',
      groups: [
        { filters: [{ field: 'data.age', operator: 'greaterThan', value: 40 }] },
        { filters: [{ field: 'email', operator: 'contains', value: 'f1' }], conditions: { logic: 'AND', groups: [{ filters: [{ field: 'data.age', operator: 'exists' }] }] } },
      ],
    },
  });
  expect(either.body.sample.map((c: { email: string }) => c.email)).toEqual(['f1@example.org', 'p1@example.org']);
  const lone = await preview({ condition: { field: 'data.age', operator: 'notExists' } });
  expect(lone.body).toMatchObject({ count: 1, sample: [expect.objectContaining({ email: 'p3@example.org' })] });
  expect((await preview({ condition: pro, limit: 0 })).body).toEqual({ count: 3, sample: [] });
});

test('refuses what saving refuses, with the field that is wrong', async () => {
  const bad = await preview({ condition: { logic: 'AND', groups: [{ filters: [{ field: 'event.signup', operator: 'equals', value: 'x' }] }] } });
  expect(bad.status).toBe(422);
  expect(bad.body.error.errors[0]).toMatchObject({ field: 'condition.groups.0.filters.0.operator', code: 'operator_not_allowed' });
  expect((await preview({ condition: { field: 'data.plan', operator: 'equals' } })).body.error.errors[0]).toMatchObject({ field: 'condition.value', code: 'required' });
  expect((await preview({ condition: pro, limit: 51 })).body.error.errors[0].field).toBe('limit');
  expect((await preview({})).status).toBe(422);

  const unknown = await preview({ condition: { field: 'segment.seg_nope', operator: 'memberOfSegment' } });
  expect(unknown.status).toBe(422);
  expect(unknown.body.error.errors[0]).toMatchObject({ field: 'condition', code: 'unknown_segment' });

  // Editing segment A, a condition naming B, which names A, is a cycle; without segmentId it is only a count.
  const a = (await post('/segments', { name: 'A', condition: pro })).body;
  const b = (await post('/segments', { name: 'B', condition: { field: `segment.${a.id}`, operator: 'memberOfSegment' } })).body;
  const cycle = await preview({ condition: { field: `segment.${b.id}`, operator: 'memberOfSegment' }, segmentId: a.id });
  expect(cycle.status).toBe(422);
  expect(cycle.body.error.errors[0]).toMatchObject({ field: 'condition', code: 'segment_cycle' });
  expect((await preview({ condition: { field: `segment.${b.id}`, operator: 'memberOfSegment' } })).body.count).toBe(3);
  expect((await preview({ condition: pro, segmentId: 'seg_nope' })).status).toBe(404);
});

test("counts the caller's project only", async () => {
  expect((await preview({ condition: pro }, other)).body.count).toBe(1);
  const theirs = (await post('/segments', { name: 'Theirs', condition: pro }, other)).body;
  const res = await preview({ condition: { field: `segment.${theirs.id}`, operator: 'memberOfSegment' } });
  expect(res.status).toBe(422);
  expect(res.body.error.errors[0].code).toBe('unknown_segment');
});
