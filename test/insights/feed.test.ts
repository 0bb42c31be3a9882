import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * The feed (GET /activity) and its aggregates over the real database. Tracked events come through the API
 * (they are "now"); emitted events, executions and campaigns are written as the service writes
 * them, at chosen times before T0, so the order of the feed is known exactly.
 */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
/** A whole second before anything the test writes. */
const T0 = Math.floor(Date.now() / 1000) * 1000;
const at = (msBefore: number) => new Date(T0 - msBefore).toISOString();

interface Item {
  id: string;
  type: string;
  name: string;
  contactId: string | null;
  email: string | null;
  data: Record<string, unknown>;
  createdAt: string;
}
interface Page {
  data: Item[];
  cursor: string | null;
  hasMore: boolean;
  total: number;
}

const get = (p: ProjectWithKeys, path: string, q: Record<string, string | number> = {}) =>
  env.http().get(path).query(q).set(bearer(p.secretKey));

async function track(p: ProjectWithKeys, email: string, event: string, data?: object) {
  const res = await env.http().post('/v1/track').set(bearer(p.secretKey)).send({ email, event, data });
  expect(res.status).toBe(200);
  return res.body.data as { contact: string; event: string; timestamp: string };
}

/** Follows the cursor to the end; `total` only on the first page, hasMore exactly when a cursor comes back. */
async function allPages(p: ProjectWithKeys, q: Record<string, string | number>) {
  const pages: Page[] = [];
  let cursor: string | undefined;
  do {
    const res = await get(p, '/activity', { ...q, ...(cursor ? { cursor } : {}) });
    expect(res.status).toBe(200);
    pages.push(res.body);
    cursor = res.body.cursor ?? undefined;
    expect(res.body.hasMore).toBe(cursor !== undefined);
  } while (cursor);
  return pages;
}

const feedIds = async (q: Record<string, string | number>, p = project) => {
  const pages = await allPages(p, { limit: 100, ...q });
  expect(pages).toHaveLength(1);
  return { ids: pages[0]!.data.map((i) => i.id), total: pages[0]!.total };
};

const fieldsOf = (res: { status: number; body: { error: { errors: { field: string }[] } } }) => ({
  status: res.status,
  fields: res.body.error.errors.map((e) => e.field),
});

let ann: string;
let bob: string;
let workflowId: string;
const tracked: Record<'purchase' | 'viewed' | 'signup', string> = { purchase: '', viewed: '', signup: '' };

/** The whole feed of `project`, newest first (see the data written in beforeAll). */
const FEED = [
  'purchase',
  'viewed',
  'signup',
  'exe_act_2:started',
  'exe_act_3:started',
  'evt_act_unsub',
  'evt_act_seg',
  'evt_act_opened',
  'cmp_act_b:scheduled',
  'evt_act_sent',
  'exe_act_1:completed',
  'exe_act_1:started', // same time as evt_act_tie: ids break the tie ("exe…" > "evt…")
  'evt_act_tie',
  'cmp_act_a:sent',
  'evt_act_us_a', // one microsecond after evt_act_us_b, though its id sorts lower
  'evt_act_us_b',
  'cmp_act_a:scheduled',
  'cmp_act_c:scheduled',
  'evt_act_old3d',
  'evt_act_old30d',
];
const ids = (names: string[]) => names.map((n) => (n in tracked ? tracked[n as keyof typeof tracked] : n));

beforeAll(async () => {
  env = await startTestEnv();
  [project, other] = await Promise.all([env.project('activity A'), env.project('activity B')]);
  const em = env.orm.em.fork();

  // Tracked through the API, in this order (newest last).
  const signup = await track(project, 'ann@example.org', 'signup', { plan: 'pro' });
  const viewed = await track(project, 'bob@example.org', 'viewed');
  const purchase = await track(project, 'ann@example.org', 'purchase', { amount: 12 });
  ann = signup.contact;
  bob = viewed.contact;
  Object.assign(tracked, { signup: signup.event, viewed: viewed.event, purchase: purchase.event });
  await track(other, 'ann@example.org', 'signup');

  const event = (id: string, contactId: string, name: string, createdAt: string, data: object = {}) =>
    query(em, 'insert into events (id, project_id, contact_id, name, data, created_at) values (?, ?, ?, ?, ?::jsonb, ?)', [
      id,
      project.id,
      contactId,
      name,
      JSON.stringify(data),
      createdAt,
    ]);
  const usBase = at(7 * HOUR).replace('Z', '');
  await event('evt_act_unsub', ann, 'contact.unsubscribed', at(HOUR));
  await event('evt_act_seg', bob, 'segment.vip.entry', at(90 * MIN));
  await event('evt_act_opened', ann, 'email.opened', at(2 * HOUR), { emailId: 'e1' });
  await event('evt_act_sent', ann, 'email.sent', at(3 * HOUR), { emailId: 'e1' });
  // A client may track "campaign.sent": it is a tracked event, not campaign activity.
  await event('evt_act_tie', bob, 'campaign.sent', at(5 * HOUR));
  await event('evt_act_us_a', ann, 'tick', `${usBase}002Z`);
  await event('evt_act_us_b', ann, 'tick', `${usBase}001Z`);
  await event('evt_act_old3d', bob, 'email.sent', at(3 * DAY));
  await event('evt_act_old30d', bob, 'email.bounced', at(30 * DAY));

  const wf = await env.http().post('/workflows').set(bearer(project.secretKey)).send({ name: 'Onboarding', eventName: 'signup' });
  expect(wf.status).toBe(201);
  workflowId = wf.body.id;
  const execution = (id: string, contactId: string, status: string, startedAt: string, rest: Record<string, string | null>) =>
    query(
      em,
      `insert into workflow_executions (id, project_id, workflow_id, contact_id, status, started_at, finished_at, updated_at,
         waiting_for_event, current_step_id)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [id, project.id, workflowId, contactId, status, startedAt, rest.finished ?? null, rest.updated ?? startedAt, rest.waitingFor ?? null, rest.step ?? null],
    );
  await execution('exe_act_1', ann, 'COMPLETED', at(5 * HOUR), { finished: at(4 * HOUR) });
  await execution('exe_act_2', bob, 'WAITING', at(30 * MIN), { updated: at(20 * MIN), waitingFor: 'purchase', step: 'stp_wait' });
  await execution('exe_act_3', ann, 'WAITING', at(50 * MIN), { updated: at(40 * MIN), step: 'stp_delay' });

  const campaign = (id: string, name: string, status: string, createdAt: string, scheduledFor: string | null, sentAt: string | null) =>
    query(
      em,
      `insert into campaigns (id, project_id, name, subject, body, from_email, status, scheduled_for, sent_at, total_recipients, created_at)
       values (?, ?, ?, 'Hi', 'Hello', 'news@acme.test', ?, ?, ?, ?, ?)`,
      [id, project.id, name, status, scheduledFor, sentAt, 42, createdAt],
    );
  await campaign('cmp_act_a', 'Autumn', 'SENT', at(10 * HOUR), at(6 * HOUR), at(5.5 * HOUR));
  await campaign('cmp_act_b', 'Black Friday', 'SCHEDULED', at(2.5 * HOUR), new Date(T0 + DAY).toISOString(), null);
  await campaign('cmp_act_c', 'Cyber Monday', 'SCHEDULED', at(20 * HOUR), new Date(T0 + HOUR).toISOString(), null);
  await campaign('cmp_act_d', 'Draft', 'DRAFT', at(HOUR), null, null);
});

afterAll(() => env.close());

test('GET /activity: one feed over events, executions and campaigns, newest first, every cursor boundary exact', async () => {
  // Page size 1 puts a cursor between every two items: ties on time and microsecond gaps included.
  const pages = await allPages(project, { limit: 1 });
  expect(pages.map((p) => p.total)).toEqual([20, ...Array(19).fill(0)]);
  expect(pages.flatMap((p) => p.data.map((i) => i.id))).toEqual(ids(FEED));

  const byFive = await allPages(project, { limit: 5 });
  expect(byFive.map((p) => [p.data.length, p.total, p.hasMore])).toEqual([
    [5, 20, true],
    [5, 0, true],
    [5, 0, true],
    [5, 0, false],
  ]);
  const items = byFive.flatMap((p) => p.data);
  expect(items.map((i) => i.id)).toEqual(ids(FEED));
  const times = items.map((i) => Date.parse(i.createdAt));
  expect([...times].sort((a, b) => b - a)).toEqual(times);

  const byId = new Map(items.map((i) => [i.id, i]));
  expect(byId.get(tracked.purchase)).toEqual({
    id: tracked.purchase,
    type: 'event.tracked',
    name: 'purchase',
    contactId: ann,
    email: 'ann@example.org',
    data: { amount: 12 },
    createdAt: expect.any(String),
  });
  expect(byId.get('evt_act_opened')).toEqual({
    id: 'evt_act_opened',
    type: 'email.opened',
    name: 'email.opened',
    contactId: ann,
    email: 'ann@example.org',
    data: { emailId: 'e1' },
    createdAt: at(2 * HOUR),
  });
  expect(byId.get('evt_act_tie')).toMatchObject({ type: 'event.tracked', name: 'campaign.sent', contactId: bob });
  expect(byId.get('evt_act_seg')).toMatchObject({ type: 'segment.vip.entry', name: 'segment.vip.entry' });
  expect(byId.get('exe_act_1:completed')).toEqual({
    id: 'exe_act_1:completed',
    type: 'workflow.completed',
    name: 'workflow.completed',
    contactId: ann,
    email: 'ann@example.org',
    data: { executionId: 'exe_act_1', workflowId, workflowName: 'Onboarding' },
    createdAt: at(4 * HOUR),
  });
  expect(byId.get('exe_act_2:started')).toEqual({
    id: 'exe_act_2:started',
    type: 'workflow.started',
    name: 'workflow.started',
    contactId: bob,
    email: 'bob@example.org',
    data: { executionId: 'exe_act_2', workflowId, workflowName: 'Onboarding' },
    createdAt: at(30 * MIN),
  });
  expect(byId.get('cmp_act_a:sent')).toEqual({
    id: 'cmp_act_a:sent',
    type: 'campaign.sent',
    name: 'campaign.sent',
    contactId: null,
    email: null,
    data: { campaignId: 'cmp_act_a', campaignName: 'Autumn', scheduledFor: at(6 * HOUR), totalRecipients: 42 },
    createdAt: at(5.5 * HOUR),
  });
  expect(byId.get('cmp_act_b:scheduled')).toEqual({
    id: 'cmp_act_b:scheduled',
    type: 'campaign.scheduled',
    name: 'campaign.scheduled',
    contactId: null,
    email: null,
    data: { campaignId: 'cmp_act_b', campaignName: 'Black Friday', scheduledFor: new Date(T0 + DAY).toISOString(), totalRecipients: 42 },
    createdAt: at(2.5 * HOUR),
  });

  // The other project sees only its own tracked event.
  const theirs = await get(other, '/activity');
  expect(theirs.body.data.map((i: Item) => [i.type, i.name])).toEqual([['event.tracked', 'signup']]);
  expect(theirs.body.total).toBe(1);

  const fresh = await env.project('activity empty');
  expect((await get(fresh, '/activity')).body).toEqual({ data: [], cursor: null, hasMore: false, total: 0 });
});

test('GET /activity filters: type (exact, prefix, list), contactId, from/to; combined', async () => {
  const only = (names: string[]) => ({ ids: ids(names), total: names.length });
  const tracked6 = ['purchase', 'viewed', 'signup', 'evt_act_tie', 'evt_act_us_a', 'evt_act_us_b'];
  expect(await feedIds({ type: 'event.tracked' })).toEqual(only(tracked6));
  expect(await feedIds({ type: 'event.' })).toEqual(only(tracked6));
  expect(await feedIds({ type: 'email.' })).toEqual(only(['evt_act_opened', 'evt_act_sent', 'evt_act_old3d', 'evt_act_old30d']));
  expect(await feedIds({ type: 'email.sent' })).toEqual(only(['evt_act_sent', 'evt_act_old3d']));
  expect(await feedIds({ type: 'email.opened, workflow.' })).toEqual(
    only(['exe_act_2:started', 'exe_act_3:started', 'evt_act_opened', 'exe_act_1:completed', 'exe_act_1:started']),
  );
  expect(await feedIds({ type: 'campaign.*' })).toEqual(
    only(['cmp_act_b:scheduled', 'cmp_act_a:sent', 'cmp_act_a:scheduled', 'cmp_act_c:scheduled']),
  );
  // Exact campaign.sent is the campaign's activity, not the tracked event of that name.
  expect(await feedIds({ type: 'campaign.sent' })).toEqual(only(['cmp_act_a:sent']));
  expect(await feedIds({ type: 'segment.vip.entry' })).toEqual(only(['evt_act_seg']));
  expect(await feedIds({ type: 'segment.' })).toEqual(only(['evt_act_seg']));
  expect(await feedIds({ type: 'contact.*' })).toEqual(only(['evt_act_unsub']));
  expect(await feedIds({ type: 'segment.vip.exit' })).toEqual(only([]));
  expect(await feedIds({ type: 'nothing.like.this' })).toEqual(only([]));

  expect(await feedIds({ contactId: ann })).toEqual(
    only([
      'purchase',
      'signup',
      'exe_act_3:started',
      'evt_act_unsub',
      'evt_act_opened',
      'evt_act_sent',
      'exe_act_1:completed',
      'exe_act_1:started',
      'evt_act_us_a',
      'evt_act_us_b',
    ]),
  );
  expect(await feedIds({ contactId: ann, type: 'workflow.started' })).toEqual(only(['exe_act_3:started', 'exe_act_1:started']));
  expect(await feedIds({ contactId: 'cnt_unknown' })).toEqual(only([]));

  // from inclusive, to exclusive: evt_act_opened sits exactly on `to`.
  const window = { from: at(5 * HOUR), to: at(2 * HOUR) };
  expect(await feedIds(window)).toEqual(only(['cmp_act_b:scheduled', 'evt_act_sent', 'exe_act_1:completed', 'exe_act_1:started', 'evt_act_tie']));
  expect(await feedIds({ ...window, type: 'workflow.,email.' })).toEqual(only(['evt_act_sent', 'exe_act_1:completed', 'exe_act_1:started']));
  const offset = new Date(T0 - 5 * HOUR).toISOString().replace('Z', '+00:00');
  expect(await feedIds({ from: offset, to: window.to })).toEqual(await feedIds(window));
  expect(await feedIds({ from: '2000-01-01', to: '2100-01-01' })).toEqual(only(FEED));

  // Paging through a filtered feed keeps the filter.
  const pages = await allPages(project, { contactId: ann, limit: 3 });
  expect(pages.map((p) => p.total)).toEqual([10, 0, 0, 0]);
  expect(pages.flatMap((p) => p.data.map((i) => i.id))).toEqual((await feedIds({ contactId: ann })).ids);
});

test('GET /activity validation: 422 on bad parameters, 400 on a bad cursor, secret key only', async () => {
  expect(fieldsOf(await get(project, '/activity', { limit: 101 }))).toEqual({ status: 422, fields: ['query.limit'] });
  expect(fieldsOf(await get(project, '/activity', { type: '' }))).toEqual({ status: 422, fields: ['query.type'] });
  expect(fieldsOf(await get(project, '/activity', { type: 'email.,,' }))).toEqual({ status: 422, fields: ['query.type'] });
  expect(fieldsOf(await get(project, '/activity', { from: 'yesterday' }))).toEqual({ status: 422, fields: ['query.from'] });
  expect(fieldsOf(await get(project, '/activity', { to: '2026-11-25T10:00:00' }))).toEqual({ status: 422, fields: ['query.to'] });
  expect(fieldsOf(await get(project, '/activity', { from: '2026-02-30' }))).toEqual({ status: 422, fields: ['query.from'] });
  expect(fieldsOf(await get(project, '/activity', { from: '2026-11-25', to: '2026-11-25' }))).toEqual({ status: 422, fields: ['query.to'] });
  const bad = await get(project, '/activity', { cursor: 'not-a-cursor' });
  expect({ status: bad.status, code: bad.body.error.code }).toEqual({ status: 400, code: 'INVALID_CURSOR' });
  const legacy = await get(project, '/activity', { cursor: Buffer.from(JSON.stringify({ after: 'evt_x' })).toString('base64url') });
  expect({ status: legacy.status, code: legacy.body.error.code }).toEqual({ status: 400, code: 'INVALID_CURSOR' });
  expect((await env.http().get('/activity').set(bearer(project.publicKey))).status).toBe(401);
});

test('GET /activity/stats: totals, last 24 hours / 7 days and per type, under the same filters', async () => {
  expect((await get(project, '/activity/stats')).body).toEqual({
    total: 20,
    last24h: 18,
    last7d: 19,
    byType: [
      { type: 'event.tracked', count: 6 },
      { type: 'campaign.scheduled', count: 3 },
      { type: 'workflow.started', count: 3 },
      { type: 'email.sent', count: 2 },
      { type: 'campaign.sent', count: 1 },
      { type: 'contact.unsubscribed', count: 1 },
      { type: 'email.bounced', count: 1 },
      { type: 'email.opened', count: 1 },
      { type: 'segment.vip.entry', count: 1 },
      { type: 'workflow.completed', count: 1 },
    ],
  });
  expect((await get(project, '/activity/stats', { from: at(5 * HOUR), to: at(2 * HOUR) })).body).toEqual({
    total: 5,
    last24h: 5,
    last7d: 5,
    byType: [
      { type: 'campaign.scheduled', count: 1 },
      { type: 'email.sent', count: 1 },
      { type: 'event.tracked', count: 1 },
      { type: 'workflow.completed', count: 1 },
      { type: 'workflow.started', count: 1 },
    ],
  });
  expect((await get(project, '/activity/stats', { contactId: bob })).body).toEqual({
    total: 6,
    last24h: 4,
    last7d: 5,
    byType: [
      { type: 'event.tracked', count: 2 },
      { type: 'email.bounced', count: 1 },
      { type: 'email.sent', count: 1 },
      { type: 'segment.vip.entry', count: 1 },
      { type: 'workflow.started', count: 1 },
    ],
  });
  expect((await get(project, '/activity/stats', { type: 'email.' })).body).toEqual({
    total: 4,
    last24h: 2,
    last7d: 3,
    byType: [
      { type: 'email.sent', count: 2 },
      { type: 'email.bounced', count: 1 },
      { type: 'email.opened', count: 1 },
    ],
  });
  expect((await get(project, '/activity/stats', { type: 'nothing.' })).body).toEqual({ total: 0, last24h: 0, last7d: 0, byType: [] });
  expect(fieldsOf(await get(project, '/activity/stats', { from: 'soon' }))).toEqual({ status: 422, fields: ['query.from'] });
});

test('GET /activity/recent-count: activity in the last N minutes', async () => {
  const before = Date.now();
  const five = await get(project, '/activity/recent-count');
  const after = Date.now();
  expect(five.status).toBe(200);
  expect(five.body.count).toBe(3);
  const since = Date.parse(five.body.since);
  expect(new Date(since).toISOString()).toBe(five.body.since);
  expect(since >= before - 5 * MIN && since <= after - 5 * MIN).toBe(true);

  expect((await get(project, '/activity/recent-count', { minutes: 45 })).body.count).toBe(4);
  expect((await get(project, '/activity/recent-count', { minutes: 100 })).body.count).toBe(7);
  expect((await get(project, '/activity/recent-count', { minutes: 100, type: 'workflow.' })).body.count).toBe(2);
  expect((await get(project, '/activity/recent-count', { minutes: 100, contactId: ann })).body.count).toBe(4);
  expect((await get(other, '/activity/recent-count')).body.count).toBe(1);
  expect(fieldsOf(await get(project, '/activity/recent-count', { minutes: 0 }))).toEqual({ status: 422, fields: ['query.minutes'] });
  expect(fieldsOf(await get(project, '/activity/recent-count', { minutes: 1441 }))).toEqual({ status: 422, fields: ['query.minutes'] });
});

test('GET /activity/types: the types that occur, sorted', async () => {
  expect((await get(project, '/activity/types')).body).toEqual({
    types: [
      'campaign.scheduled',
      'campaign.sent',
      'contact.unsubscribed',
      'email.bounced',
      'email.opened',
      'email.sent',
      'event.tracked',
      'segment.vip.entry',
      'workflow.completed',
      'workflow.started',
    ],
  });
  expect((await get(other, '/activity/types')).body).toEqual({ types: ['event.tracked'] });
});

test('GET /activity/upcoming: scheduled campaigns soonest first, waiting executions longest waiting first', async () => {
  expect((await get(project, '/activity/upcoming')).body).toEqual({
    campaigns: [
      { id: 'cmp_act_c', name: 'Cyber Monday', scheduledFor: new Date(T0 + HOUR).toISOString() },
      { id: 'cmp_act_b', name: 'Black Friday', scheduledFor: new Date(T0 + DAY).toISOString() },
    ],
    executions: [
      {
        id: 'exe_act_3',
        workflowId,
        workflowName: 'Onboarding',
        contactId: ann,
        email: 'ann@example.org',
        waitingForEvent: null,
        currentStepId: 'stp_delay',
        startedAt: at(50 * MIN),
        waitingSince: at(40 * MIN),
      },
      {
        id: 'exe_act_2',
        workflowId,
        workflowName: 'Onboarding',
        contactId: bob,
        email: 'bob@example.org',
        waitingForEvent: 'purchase',
        currentStepId: 'stp_wait',
        startedAt: at(30 * MIN),
        waitingSince: at(20 * MIN),
      },
    ],
  });
  const one = (await get(project, '/activity/upcoming', { limit: 1 })).body;
  expect([one.campaigns.map((c: { id: string }) => c.id), one.executions.map((x: { id: string }) => x.id)]).toEqual([
    ['cmp_act_c'],
    ['exe_act_3'],
  ]);
  expect((await get(other, '/activity/upcoming')).body).toEqual({ campaigns: [], executions: [] });
  expect(fieldsOf(await get(project, '/activity/upcoming', { limit: 0 }))).toEqual({ status: 422, fields: ['query.limit'] });
});
