import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney, eventDispatched, listExecutions, track, waitForExecution } from '../helpers/journeys';
import { waitUntil } from '../helpers/sending';

/** The Segments API end to end: real database, real Temporal server and worker. */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;
const auth = () => bearer(project.secretKey);
const http = () => env.http();
const em = () => env.orm.em.fork();

interface Segment {
  id: string;
  name: string;
  description: string | null;
  type: 'DYNAMIC' | 'STATIC';
  condition: unknown;
  trackMembership: boolean;
  memberCount: number;
  memberCountUpdatedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

async function contact(email: string, data: Record<string, unknown> = {}, subscribed = true, p = project) {
  const res = await http().post('/contacts').set(bearer(p.secretKey)).send({ email, data, subscribed });
  expect([200, 201]).toContain(res.status);
  return res.body.id as string;
}

async function createSegment(body: Record<string, unknown>): Promise<Segment> {
  const res = await http().post('/segments').set(auth()).send(body);
  if (res.status !== 201) throw new Error(`create segment: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Segment;
}

const emailsOf = (res: { body: { data: { email: string }[] } }) => res.body.data.map((c) => c.email);

async function eventsNamed(name: string): Promise<{ id: string; contact_id: string; data: Record<string, unknown> }[]> {
  return query(em(), 'select id, contact_id, data from events where project_id = ? and name = ? order by id', [project.id, name]);
}

beforeAll(async () => {
  env = await startTestEnv();
  await env.startWorker();
  project = await env.project('segments');
  other = await env.project('segments other');
});

afterAll(() => env.close());

describe('create, read, update: DYNAMIC needs a condition, STATIC refuses one', () => {
  beforeAll(async () => {
    await contact('pro1@example.org', { plan: 'pro', age: 41 });
    await contact('pro2@example.org', { plan: 'PRO', age: '29' }, false);
    await contact('free1@example.org', { plan: 'free', age: 35 });
  });

  test('a DYNAMIC segment is created with its member count; GET returns it, the list has it', async () => {
    const seg = await createSegment({
      name: 'Pro users',
      description: 'Paying',
      condition: { field: 'data.plan', operator: 'equals', value: 'pro' },
    });
    expect(seg).toMatchObject({
      name: 'Pro users',
      description: 'Paying',
      type: 'DYNAMIC',
      trackMembership: false,
      memberCount: 2,
      condition: { field: 'data.plan', operator: 'equals', value: 'pro' },
    });
    expect(seg.id).toMatch(/^seg_/);
    expect(new Date(seg.memberCountUpdatedAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body).toEqual(seg);
    const list = await http().get('/segments').set(auth());
    expect(list.status).toBe(200);
    expect(list.body.map((s: Segment) => s.id)).toContain(seg.id);
    // Another project sees neither the segment nor it in its list.
    expect((await http().get(`/segments/${seg.id}`).set(bearer(other.secretKey))).body.error.code).toBe('SEGMENT_NOT_FOUND');
    expect((await http().get('/segments').set(bearer(other.secretKey))).body).toEqual([]);
  });

  test('AND/OR groups with nesting, through the API', async () => {
    const seg = await createSegment({
      name: 'Mature pros or free',
      condition: {
        logic: 'OR',
        groups: [
          { filters: [{ field: 'data.plan', operator: 'equals', value: 'free' }] },
          {
            filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }],
            conditions: { logic: 'AND', groups: [{ filters: [{ field: 'data.age', operator: 'greaterThan', value: 30 }, { field: 'subscribed', operator: 'equals', value: true }] }] },
          },
        ],
      },
    });
    expect(seg.memberCount).toBe(2);
    const members = await http().get(`/segments/${seg.id}/contacts`).set(auth());
    expect(emailsOf(members).sort()).toEqual(['free1@example.org', 'pro1@example.org']);
  });

  test('validation: 422 with the field that is wrong', async () => {
    const bad = async (body: Record<string, unknown>) => {
      const res = await http().post('/segments').set(auth()).send(body);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      return res.body.error.errors as { field: string; message: string; code: string }[];
    };
    expect((await bad({ name: 'no condition' }))[0]).toMatchObject({ field: 'condition', code: 'required' });
    expect((await bad({ name: 'static', type: 'STATIC', condition: { field: 'email', operator: 'exists' } }))[0]).toMatchObject({
      field: 'condition',
      code: 'not_allowed',
    });
    expect((await bad({ name: 'x', condition: { field: 'event.signup', operator: 'equals', value: 'x' } }))[0]).toEqual({
      field: 'condition.operator',
      message: 'event.signup takes triggered, notTriggered, triggeredWithin, triggeredOlderThan',
      code: 'operator_not_allowed',
    });
    expect((await bad({ name: 'x', condition: { field: 'name', operator: 'exists' } }))[0]).toMatchObject({ field: 'condition.field', code: 'unknown_field' });
    expect((await bad({ name: 'x', condition: { field: 'data.d', operator: 'within', value: 3 } }))[0]).toMatchObject({ field: 'condition.unit', code: 'required' });
    expect((await bad({ name: 'x', condition: { field: 'data.d', operator: 'equals' } }))[0]).toMatchObject({ field: 'condition.value', code: 'required' });
    expect(
      (await bad({ name: 'x', condition: { logic: 'AND', groups: [{ filters: [{ field: 'event.x', operator: 'exists' }] }] } }))[0],
    ).toMatchObject({ field: 'condition.groups.0.filters.0.operator', code: 'operator_not_allowed' });
    const shapeless = (await bad({ name: 'x', condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.a', operator: 'nope' }] }] } }))[0]!;
    expect(shapeless.field).toBe('condition');
    expect(shapeless.message).toMatch(/groups\.0\.filters\.0\.operator: Invalid option/);
    expect((await bad({ name: 'x', condition: { field: 'segment.seg_nope', operator: 'memberOfSegment' } }))[0]).toMatchObject({ code: 'unknown_segment' });
    expect((await bad({ name: '', condition: { field: 'email', operator: 'exists' } }))[0]!.field).toBe('name');
  });

  test('PATCH: name, description, condition (recounted), trackMembership; no condition on STATIC; no cycles', async () => {
    const seg = await createSegment({ name: 'Adults', condition: { field: 'data.age', operator: 'greaterThanOrEqual', value: 35 } });
    expect(seg.memberCount).toBe(2);
    const renamed = await http().patch(`/segments/${seg.id}`).set(auth()).send({ name: 'Older adults', description: null });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'Older adults', description: null, memberCount: 2 });
    const recounted = await http()
      .patch(`/segments/${seg.id}`)
      .set(auth())
      .send({ condition: { field: 'data.age', operator: 'greaterThan', value: 40 }, trackMembership: true });
    expect(recounted.body).toMatchObject({ memberCount: 1, trackMembership: true, condition: { field: 'data.age', operator: 'greaterThan', value: 40 } });
    expect(new Date(recounted.body.updatedAt).getTime()).toBeGreaterThanOrEqual(new Date(seg.updatedAt).getTime());

    // A segment that refers to this one; pointing this one back at it is a cycle.
    const outer = await createSegment({ name: 'Outer', condition: { field: `segment.${seg.id}`, operator: 'memberOfSegment' } });
    expect(outer.memberCount).toBe(1);
    const cycle = await http().patch(`/segments/${seg.id}`).set(auth()).send({ condition: { field: `segment.${outer.id}`, operator: 'notMemberOfSegment' } });
    expect(cycle.status).toBe(422);
    expect(cycle.body.error.errors[0]).toMatchObject({ field: 'condition', code: 'segment_cycle' });
    const self = await http().patch(`/segments/${seg.id}`).set(auth()).send({ condition: { field: `segment.${seg.id}`, operator: 'memberOfSegment' } });
    expect(self.body.error.errors[0].code).toBe('segment_cycle');

    const fixed = await createSegment({ name: 'List', type: 'STATIC' });
    const staticCondition = await http().patch(`/segments/${fixed.id}`).set(auth()).send({ condition: { field: 'email', operator: 'exists' } });
    expect(staticCondition.status).toBe(422);
    expect((await http().patch(`/segments/${fixed.id}`).set(auth()).send({})).status).toBe(422);
    expect((await http().patch('/segments/seg_nope').set(auth()).send({ name: 'x' })).status).toBe(404);
  });
});

describe('contacts of a segment (page-based, live) and the cached count', () => {
  test('pages of newest contacts; a dynamic segment is evaluated at request time, the cache only on refresh', async () => {
    const tag = 'pager';
    for (let i = 0; i < 5; i++) await contact(`${tag}${i}@example.org`, { cohort: tag, n: i });
    const seg = await createSegment({ name: 'Pager', condition: { field: 'data.cohort', operator: 'equals', value: tag } });
    expect(seg.memberCount).toBe(5);
    const page1 = await http().get(`/segments/${seg.id}/contacts?page=1&pageSize=2`).set(auth());
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ total: 5, page: 1, pageSize: 2 });
    expect(emailsOf(page1)).toEqual(['pager4@example.org', 'pager3@example.org']);
    expect(page1.body.data[0]).toMatchObject({ email: 'pager4@example.org', subscribed: true, data: { cohort: tag, n: 4 } });
    const page3 = await http().get(`/segments/${seg.id}/contacts?page=3&pageSize=2`).set(auth());
    expect(emailsOf(page3)).toEqual(['pager0@example.org']);
    expect((await http().get(`/segments/${seg.id}/contacts?page=9&pageSize=2`).set(auth())).body).toMatchObject({ data: [], total: 5 });
    expect((await http().get(`/segments/${seg.id}/contacts?pageSize=101`).set(auth())).status).toBe(422);

    // Live: a new matching contact shows at once; the cached count waits for refresh.
    await contact('pager5@example.org', { cohort: tag });
    expect((await http().get(`/segments/${seg.id}/contacts`).set(auth())).body.total).toBe(6);
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body.memberCount).toBe(5);
    const refreshed = await http().post(`/segments/${seg.id}/refresh`).set(auth());
    expect(refreshed.status).toBe(200);
    expect(refreshed.body).toEqual({ memberCount: 6 });
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body.memberCount).toBe(6);
    expect((await http().get('/segments/seg_nope/contacts').set(auth())).status).toBe(404);
  });
});

describe('static segments: members by email', () => {
  test('add (createMissing, subscribed), count, list, remove; a dynamic segment takes no members', async () => {
    await contact('known1@example.org');
    await contact('known2@example.org');
    const seg = await createSegment({ name: 'VIP list', type: 'STATIC' });
    expect(seg).toMatchObject({ type: 'STATIC', condition: null, memberCount: 0 });

    const added = await http()
      .post(`/segments/${seg.id}/members`)
      .set(auth())
      .send({ emails: ['Known1@Example.org', 'known2@example.org', 'stranger@example.org', 'KNOWN1@example.org'] });
    expect(added.status).toBe(200);
    expect(added.body).toEqual({ added: 2, created: 0, notFound: ['stranger@example.org'] });
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body.memberCount).toBe(2);

    // Again, with createMissing: the stranger becomes an unsubscribed contact; known ones are already in.
    const again = await http()
      .post(`/segments/${seg.id}/members`)
      .set(auth())
      .send({ emails: ['known1@example.org', 'Stranger@example.org'], createMissing: true, subscribed: false });
    expect(again.body).toEqual({ added: 1, created: 1, notFound: [] });
    const stranger = await queryOne<{ subscribed: boolean }>(em(), 'select subscribed from contacts where project_id = ? and email = ?', [
      project.id,
      'stranger@example.org',
    ]);
    expect(stranger).toEqual({ subscribed: false });
    const members = await http().get(`/segments/${seg.id}/contacts`).set(auth());
    expect(members.body.total).toBe(3);
    expect(emailsOf(members).sort()).toEqual(['known1@example.org', 'known2@example.org', 'stranger@example.org']);
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body.memberCount).toBe(3);

    const removed = await http().delete(`/segments/${seg.id}/members`).set(auth()).send({ emails: ['KNOWN2@example.org', 'nobody@example.org'] });
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ removed: 1 });
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body.memberCount).toBe(2);

    // Membership of a static segment, from a dynamic one.
    const inList = await createSegment({ name: 'In list and subscribed', condition: { logic: 'AND', groups: [{ filters: [{ field: `segment.${seg.id}`, operator: 'memberOfSegment' }, { field: 'subscribed', operator: 'equals', value: true }] }] } });
    expect(inList.memberCount).toBe(1);

    const dynamic = await createSegment({ name: 'Dyn', condition: { field: 'email', operator: 'exists' } });
    const refused = await http().post(`/segments/${dynamic.id}/members`).set(auth()).send({ emails: ['known1@example.org'] });
    expect(refused.status).toBe(409);
    expect((await http().delete(`/segments/${dynamic.id}/members`).set(auth()).send({ emails: ['known1@example.org'] })).status).toBe(409);
    expect((await http().post(`/segments/${seg.id}/members`).set(auth()).send({ emails: ['not an email'] })).status).toBe(422);
    expect((await http().post(`/segments/${seg.id}/members`).set(auth()).send({ emails: [] })).status).toBe(422);
  });
});

describe('compute: tracked dynamic segments write membership and fire entry/exit events that trigger workflows', () => {
  test('entry events start the workflow they trigger; exits are recorded; refresh fires none', async () => {
    // Triggered by the entry event of the segment named "VIP Buyers!" (slug vip-buyers).
    const wf = await buildJourney(env, project, {
      eventName: 'segment.vip-buyers.entry',
      steps: [{ key: 'done', type: 'EXIT', config: { reason: 'welcomed' } }],
      transitions: [['trigger', 'done']],
    });
    const ann = await contact('buyer-ann@example.org', { spend: 500 });
    const bob = await contact('buyer-bob@example.org', { spend: 120 });
    await contact('buyer-cy@example.org', { spend: 10 });
    await track(env, project, 'buyer-ann@example.org', 'purchase');
    await track(env, project, 'buyer-bob@example.org', 'purchase');
    await track(env, project, 'buyer-cy@example.org', 'purchase');

    const seg = await createSegment({
      name: 'VIP Buyers!',
      trackMembership: true,
      condition: {
        logic: 'AND',
        groups: [{ filters: [{ field: 'data.spend', operator: 'greaterThanOrEqual', value: 100 }, { field: 'event.purchase', operator: 'triggeredWithin', value: 7, unit: 'days' }] }],
      },
    });
    expect(seg.memberCount).toBe(2);

    const first = await http().post(`/segments/${seg.id}/compute`).set(auth());
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ added: 2, removed: 0, total: 2 });
    const entries = await eventsNamed('segment.vip-buyers.entry');
    expect(entries.map((e) => e.contact_id).sort()).toEqual([ann, bob].sort());
    expect(entries[0]!.data).toEqual({ segmentId: seg.id, segmentName: 'VIP Buyers!' });
    // Each entry started the workflow, with the event data as its context.
    for (const id of [ann, bob]) {
      const run = await waitForExecution(env, project, wf.id, id, ['EXITED']);
      expect(run.context).toEqual({ segmentId: seg.id, segmentName: 'VIP Buyers!' });
    }

    // Nothing changed: no events. Bob drops below the threshold: one exit.
    expect((await http().post(`/segments/${seg.id}/compute`).set(auth())).body).toEqual({ added: 0, removed: 0, total: 2 });
    await http().patch(`/contacts/${bob}`).set(auth()).send({ data: { spend: 50 } });
    expect((await http().post(`/segments/${seg.id}/compute`).set(auth())).body).toEqual({ added: 0, removed: 1, total: 1 });
    const exits = await eventsNamed('segment.vip-buyers.exit');
    expect(exits.map((e) => e.contact_id)).toEqual([bob]);
    expect((await eventsNamed('segment.vip-buyers.entry')).length).toBe(2);
    expect((await http().get(`/segments/${seg.id}`).set(auth())).body.memberCount).toBe(1);

    // Refresh: the count follows the condition, but no events and no membership writes.
    await http().patch(`/contacts/${bob}`).set(auth()).send({ data: { spend: 1000 } });
    const eventsBefore = (await queryOne<{ n: number }>(em(), `select count(*)::int as n from events where project_id = ? and name like 'segment.%'`, [project.id]))!.n;
    expect((await http().post(`/segments/${seg.id}/refresh`).set(auth())).body).toEqual({ memberCount: 2 });
    const eventsAfter = (await queryOne<{ n: number }>(em(), `select count(*)::int as n from events where project_id = ? and name like 'segment.%'`, [project.id]))!.n;
    expect(eventsAfter).toBe(eventsBefore);
    const members = await query<{ contact_id: string }>(em(), 'select contact_id from segment_members where segment_id = ?', [seg.id]);
    expect(members.map((m) => m.contact_id)).toEqual([ann]);
    // No new execution either (ann's entry was her only one; bob has not re-entered).
    expect((await listExecutions(env, project, wf.id)).length).toBe(2);

    // The next compute sees bob again: an entry event, which does not start the workflow a second
    // time (allowReentry is false), but is recorded.
    expect((await http().post(`/segments/${seg.id}/compute`).set(auth())).body).toEqual({ added: 1, removed: 0, total: 2 });
    const reentry = await eventsNamed('segment.vip-buyers.entry');
    expect(reentry.length).toBe(3);
    await eventDispatched(env, reentry[2]!.id);
    expect((await listExecutions(env, project, wf.id)).length).toBe(2);
  });

  test('exit events trigger workflows too; untracked or static segments are not computed', async () => {
    const wf = await buildJourney(env, project, {
      eventName: 'segment.leavers.exit',
      steps: [{ key: 'done', type: 'EXIT', config: {} }],
      transitions: [['trigger', 'done']],
    });
    const id = await contact('leaver@example.org', { stay: true });
    const seg = await createSegment({ name: 'Leavers', trackMembership: true, condition: { field: 'data.stay', operator: 'equals', value: true } });
    expect((await http().post(`/segments/${seg.id}/compute`).set(auth())).body).toMatchObject({ added: 1 });
    await http().patch(`/contacts/${id}`).set(auth()).send({ data: { stay: false } });
    expect((await http().post(`/segments/${seg.id}/compute`).set(auth())).body).toEqual({ added: 0, removed: 1, total: 0 });
    await waitForExecution(env, project, wf.id, id, ['EXITED', 'COMPLETED']);

    const untracked = await createSegment({ name: 'Untracked', condition: { field: 'email', operator: 'exists' } });
    const refused = await http().post(`/segments/${untracked.id}/compute`).set(auth());
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('CONFLICT');
    const list = await createSegment({ name: 'A list', type: 'STATIC', trackMembership: true });
    expect((await http().post(`/segments/${list.id}/compute`).set(auth())).status).toBe(409);
    expect((await http().post('/segments/seg_nope/compute').set(auth())).status).toBe(404);

    // Turning tracking off forgets the membership.
    await http().patch(`/segments/${seg.id}`).set(auth()).send({ trackMembership: false });
    await waitUntil(async () => (await query(em(), 'select 1 from segment_members where segment_id = ?', [seg.id])).length === 0);
  });
});

describe('delete, and where segments are used', () => {
  /** A campaign row using the segment, in whatever shape the campaigns table has (only segment_id and status matter here). */
  async function campaignUsing(segmentId: string, status: string): Promise<string> {
    const id = `cmp_segtest_${Math.random().toString(16).slice(2)}`;
    const required = await query<{ column_name: string; data_type: string }>(
      em(),
      `select column_name, data_type from information_schema.columns
       where table_schema = current_schema() and table_name = 'campaigns' and is_nullable = 'NO' and column_default is null`,
    );
    const values: Record<string, unknown> = { id, project_id: project.id, segment_id: segmentId, status };
    for (const c of required) {
      if (c.column_name in values) continue;
      values[c.column_name] = c.data_type.includes('int') || c.data_type === 'numeric' ? 0 : c.data_type === 'boolean' ? false : c.data_type.includes('timestamp') ? new Date().toISOString() : c.data_type === 'jsonb' ? '{}' : 'x';
    }
    const cols = Object.keys(values);
    await query(em(), `insert into campaigns (${cols.join(', ')}) values (${cols.map(() => '?').join(', ')})`, cols.map((c) => values[c]));
    return id;
  }

  test('409 while a scheduled or sending campaign uses the segment; deleted otherwise', async () => {
    const seg = await createSegment({ name: 'Audience', condition: { field: 'subscribed', operator: 'equals', value: true } });
    const campaign = await campaignUsing(seg.id, 'SCHEDULED');
    const refused = await http().delete(`/segments/${seg.id}`).set(auth());
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('CONFLICT');
    await query(em(), `update campaigns set status = 'SENDING' where id = ?`, [campaign]);
    expect((await http().delete(`/segments/${seg.id}`).set(auth())).status).toBe(409);
    await query(em(), `update campaigns set status = 'SENT' where id = ?`, [campaign]);
    const deleted = await http().delete(`/segments/${seg.id}`).set(auth());
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: seg.id, deleted: true });
    expect((await http().get(`/segments/${seg.id}`).set(auth())).status).toBe(404);
    expect((await http().delete(`/segments/${seg.id}`).set(auth())).status).toBe(404);
    await query(em(), 'delete from campaigns where id = ?', [campaign]);
  });

  test('field and event usage list segments, the campaigns addressing them, and CONDITION steps', async () => {
    const seg = await createSegment({
      name: 'Usage',
      condition: {
        logic: 'OR',
        groups: [{ filters: [{ field: 'data.tier', operator: 'exists' }] }, { filters: [{ field: 'event.upgraded', operator: 'triggered' }], conditions: { logic: 'AND', groups: [{ filters: [{ field: 'data.tier.level', operator: 'gt', value: 1 }] }] } }],
      },
    });
    const wf = await buildJourney(env, project, {
      eventName: 'usage-check',
      steps: [{ key: 'check', type: 'CONDITION', config: { field: 'data.tier', operator: 'equals', value: 'gold' } }],
      transitions: [],
      enable: false,
    });
    const campaign = await campaignUsing(seg.id, 'DRAFT');
    const usage = await http().get('/contacts/fields/data.tier/usage').set(auth());
    expect(usage.status).toBe(200);
    expect(usage.body).toEqual({
      field: 'data.tier',
      segments: [{ id: seg.id, name: 'Usage' }],
      campaigns: [{ id: campaign, name: 'x', status: 'DRAFT' }],
      workflows: [{ workflowId: wf.id, workflowName: 'wf usage-check', stepId: wf.stepIds.check, stepName: null, field: 'data.tier' }],
    });
    expect((await http().get('/contacts/fields/tier/usage').set(auth())).body.segments).toEqual([{ id: seg.id, name: 'Usage' }]);
    expect((await http().get('/contacts/fields/data.tie/usage').set(auth())).body).toMatchObject({ segments: [], workflows: [] });
    const email = await http().get('/contacts/fields/email/usage').set(auth());
    expect(email.body.field).toBe('email');
    expect(email.body.segments.map((s: { name: string }) => s.name)).toEqual(expect.arrayContaining(['Untracked', 'Dyn']));

    const events = await http().get('/events/upgraded/usage').set(auth());
    expect(events.status).toBe(200);
    expect(events.body.segments).toEqual([{ id: seg.id, name: 'Usage' }]);
    expect(events.body.campaigns).toEqual([{ id: campaign, name: 'x', status: 'DRAFT' }]);
    expect((await http().get('/events/downgraded/usage').set(auth())).body.segments).toEqual([]);
  });
});
