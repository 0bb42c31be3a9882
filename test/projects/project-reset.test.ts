import { newId } from '../../db/ids';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { workflowIds } from '../../temporal/ids';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';
import { waitUntil } from '../helpers/sending';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
  await env.startWorker();
});
afterAll(() => env.close());

/** Every table a reset empties for the project. */
const WIPED_TABLES = [
  'events',
  'emails',
  'attachment_sets',
  'workflow_executions',
  'campaigns',
  'segments',
  'workflows',
  'contacts',
  'contact_fields',
  'templates',
  'import_jobs',
  'bulk_jobs',
  'idempotency_keys',
];
/** What a reset keeps. */
const KEPT_TABLES = ['project_members', 'domains', 'suppressions'];

async function counts(projectId: string, tables: string[]): Promise<Record<string, number>> {
  const em = env.orm.em.fork();
  const out: Record<string, number> = {};
  for (const t of tables) {
    out[t] = (await queryOne<{ n: number }>(em, `select count(*)::int as n from ${t} where project_id = ?`, [projectId]))!.n;
  }
  return out;
}

const temporalStatus = async (workflowId: string) => (await env.temporal.client.workflow.getHandle(workflowId).describe()).status.name;

interface Populated {
  project: ProjectWithKeys;
  owner: TestUser;
  executionId: string;
  campaignId: string;
}

/** A project with something in every table a reset empties, a waiting journey and a scheduled campaign. */
async function populate(name: string): Promise<Populated> {
  const project = await env.project(name);
  const owner = await createTestUser(env);
  await addTestMember(env, project.id, owner.id, 'OWNER');
  const key = bearer(project.secretKey);
  const em = env.orm.em.fork();
  const domain = `${project.id.slice(-10)}.reset.test`;
  // Written directly as verified: no DNS here, and no verification workflow to flip it back.
  await query(
    em,
    `insert into domains (id, project_id, domain, status, dkim_selector, dkim_private_key, dkim_public_key, verified_at)
     values (?, ?, ?, 'verified', 'sel', 'unused', 'unused', now())`,
    [newId('dom'), project.id, domain],
  );
  await query(em, `insert into suppressions (project_id, email, reason) values (?, 'bounced@x.io', 'hard_bounce')`, [project.id]);

  expect((await env.http().post('/contacts').set(key).send({ email: 'ada@x.io', data: { plan: 'pro' } })).status).toBe(201);
  const tpl = await env.http().post('/templates').set(key).send({ name: 'Welcome', subject: 'Hi', body: 'Hello', from: `me@${domain}` });
  expect(tpl.status).toBe(201);
  expect(
    (await env.http().post('/segments').set(key).send({ name: 'Pros', condition: { field: 'data.plan', operator: 'equals', value: 'pro' } }))
      .status,
  ).toBe(201);
  const wf = await buildJourney(env, project, {
    eventName: 'signup',
    steps: [{ key: 'wait', type: 'DELAY', config: { amount: 30, unit: 'days' } }],
    transitions: [['trigger', 'wait']],
  });
  const tracked = await env.http().post('/v1/track').set(key).set('Idempotency-Key', `k-${project.id}`).send({ event: 'signup', email: 'bob@x.io' });
  expect(tracked.status).toBe(200);
  const execution = await waitUntil(async () =>
    queryOne<{ id: string }>(em, `select id from workflow_executions where workflow_id = ? and status = 'WAITING'`, [wf.id]),
  );
  await query(
    em,
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, sent_at)
     values (gen_random_uuid(), ?, 'transactional', 'ada@x.io', ?, 's', 'b', 'SENT', now())`,
    [project.id, `me@${domain}`],
  );
  await query(em, `insert into attachment_sets (id, project_id, files) values (gen_random_uuid(), ?, '[]'::jsonb)`, [project.id]);
  const csv = await env.http().post('/contacts/import').set(key).attach('file', Buffer.from('email\ncy@x.io\n'), 'c.csv');
  expect(csv.status).toBe(202);
  const contactId = (await queryOne<{ id: string }>(em, `select id from contacts where project_id = ? and email = 'ada@x.io'`, [project.id]))!.id;
  const bulk = await env.http().post('/contacts/bulk-unsubscribe').set(key).send({ ids: [contactId] });
  expect(bulk.status).toBe(202);
  // Both jobs finish before the counts are taken.
  await waitUntil(async () => (await env.http().get(`/contacts/import/${csv.body.jobId}`).set(key)).body.status === 'completed');
  await waitUntil(async () => (await env.http().get(`/contacts/bulk/${bulk.body.jobId}`).set(key)).body.status === 'completed');

  const campaign = await env
    .http()
    .post('/campaigns')
    .set(key)
    .send({ name: 'Later', subject: 'News', body: 'Body', from: `me@${domain}` });
  expect(campaign.status).toBe(201);
  const scheduledFor = new Date(Date.now() + 86_400_000).toISOString();
  const sent = await env.http().post(`/campaigns/${campaign.body.id}/send`).set(key).send({ scheduledFor });
  expect([sent.status, sent.body.status]).toEqual([200, 'SCHEDULED']);
  return { project, owner, executionId: execution.id, campaignId: campaign.body.id };
}

const reset = (p: Populated, confirm: unknown, user: TestUser = p.owner) =>
  env.http().post(`/users/@me/projects/${p.project.id}/reset`).set({ Cookie: user.cookie }).send({ confirm });

test("reset wipes only that project's data, cancels its running work, and keeps project, keys, members, domains", async () => {
  const a = await populate('Project A');
  const b = await populate('Project B');
  const everyTable = [...WIPED_TABLES, ...KEPT_TABLES];
  const before = { a: await counts(a.project.id, everyTable), b: await counts(b.project.id, everyTable) };
  for (const t of WIPED_TABLES) expect([t, before.a[t]]).not.toEqual([t, 0]);

  const res = await reset(a, 'Project A');
  expect(res.status).toBe(200);
  expect(res.body.cancelled).toEqual({ executions: 1, campaigns: 1 });
  expect(res.body.deleted).toMatchObject({ contacts: before.a.contacts, templates: 1, campaigns: 1, segments: 1, workflows: 1 });

  const after = { a: await counts(a.project.id, everyTable), b: await counts(b.project.id, everyTable) };
  for (const t of WIPED_TABLES) expect([t, after.a[t]]).toEqual([t, 0]);
  for (const t of KEPT_TABLES) expect([t, after.a[t]]).toEqual([t, before.a[t]]);
  expect(after.b).toEqual(before.b);

  // A's journey and campaign were stopped in Temporal; B's are still running.
  await waitUntil(async () => (await temporalStatus(workflowIds.journey(a.executionId))) === 'CANCELLED');
  await waitUntil(async () => (await temporalStatus(workflowIds.campaign(a.campaignId))) === 'CANCELLED');
  expect(await temporalStatus(workflowIds.journey(b.executionId))).toBe('RUNNING');
  expect(await temporalStatus(workflowIds.campaign(b.campaignId))).toBe('RUNNING');
  const bCampaign = await env.http().get(`/campaigns/${b.campaignId}`).set(bearer(b.project.secretKey));
  expect(bCampaign.body.status).toBe('SCHEDULED');

  // The project and its keys still work, empty.
  const contacts = await env.http().get('/contacts').set(bearer(a.project.secretKey));
  expect([contacts.status, contacts.body.data]).toEqual([200, []]);
  expect((await env.http().get('/users/@me/projects').set({ Cookie: a.owner.cookie })).body[0].name).toBe('Project A');
});

test("reset needs the exact project name (422, nothing deleted) and the ADMIN role; another project's key is refused", async () => {
  const p = await populate('Exact Name');
  const before = await counts(p.project.id, WIPED_TABLES);
  for (const wrong of ['exact name', 'Exact Name ', '', 42]) {
    const res = await reset(p, wrong);
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('confirm');
  }
  expect((await env.http().post(`/users/@me/projects/${p.project.id}/reset`).set({ Cookie: p.owner.cookie }).send({})).status).toBe(422);

  const member = await createTestUser(env);
  await addTestMember(env, p.project.id, member.id, 'MEMBER');
  const byMember = await reset(p, 'Exact Name', member);
  expect([byMember.status, byMember.body.error.code]).toEqual([403, 'FORBIDDEN']);
  const other = await env.project();
  const byOtherKey = await env.http().post(`/users/@me/projects/${p.project.id}/reset`).set(bearer(other.secretKey)).send({ confirm: 'Exact Name' });
  expect([byOtherKey.status, byOtherKey.body.error.code]).toEqual([403, 'PROJECT_ACCESS_DENIED']);

  expect(await counts(p.project.id, WIPED_TABLES)).toEqual(before);
  expect(await temporalStatus(workflowIds.journey(p.executionId))).toBe('RUNNING');

  const admin = await createTestUser(env);
  await addTestMember(env, p.project.id, admin.id, 'ADMIN');
  expect((await reset(p, 'Exact Name', admin)).status).toBe(200);
});

test('deleting a project cancels its running journey and campaign in Temporal', async () => {
  const p = await populate('Doomed');
  const res = await env.http().delete(`/users/@me/projects/${p.project.id}`).set({ Cookie: p.owner.cookie });
  expect(res.status).toBe(200);
  await waitUntil(async () => (await temporalStatus(workflowIds.journey(p.executionId))) === 'CANCELLED');
  await waitUntil(async () => (await temporalStatus(workflowIds.campaign(p.campaignId))) === 'CANCELLED');
  expect(await queryOne(env.orm.em.fork(), 'select 1 from projects where id = ?', [p.project.id])).toBeUndefined();
});
