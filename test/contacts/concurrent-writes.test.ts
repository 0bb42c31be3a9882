import { randomInt } from 'node:crypto';
import { newId } from '../../db/ids';
import { query } from '../../db/sql';
import { generateDkimKeyPair } from '../../mail/dkim';
import { workflowIds } from '../../temporal/ids';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * The same write sent many times at once, as a double-clicking user or a retrying client does:
 * every answer is a success or a clear conflict (never a 500 from a unique index), and the
 * database holds exactly one of the thing.
 */

const BURST = 12;
let env: TestEnv;
let project: ProjectWithKeys;
let owner: TestUser;

beforeAll(async () => {
  env = await startTestEnv({ RATE_LIMIT_PER_MINUTE: '1000000' });
  project = await env.project('concurrent writes');
  owner = await createTestUser(env);
  await addTestMember(env, project.id, owner.id, 'OWNER');
}, 60_000);

afterAll(() => env?.close());

async function burst(send: () => PromiseLike<{ status: number }>): Promise<number[]> {
  const results = await Promise.all(Array.from({ length: BURST }, () => send()));
  return results.map((r) => r.status).sort();
}

async function addVerifiedDomain(domain: string): Promise<void> {
  const keys = await generateDkimKeyPair();
  await query(
    env.orm.em.fork(),
    `insert into domains (id, project_id, domain, status, dkim_selector, dkim_private_key, dkim_public_key, verified_at)
     values (?, ?, ?, 'verified', ?, ?, ?, now())`,
    [newId('dom'), project.id, domain, keys.selector, keys.privateKeyPem, keys.publicKeyBase64],
  );
}

const count = async (sql: string, params: unknown[]) =>
  Number((await query<{ n: string }>(env.orm.em.fork(), `select count(*) as n from ${sql}`, params))[0]!.n);

test('upserting one new contact: every answer 200/201, one contact', async () => {
  const statuses = await burst(() =>
    env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'Race@Example.com', data: { plan: 'pro' } }),
  );
  expect(statuses.every((s) => s === 200 || s === 201)).toBe(true);
  expect(statuses.filter((s) => s === 201)).toHaveLength(1);
  expect(await count('contacts where project_id = ? and email = ?', [project.id, 'race@example.com'])).toBe(1);
});

test('tracking an event for a new address: every answer 200, one contact, every event kept', async () => {
  const statuses = await burst(() =>
    env.http().post('/v1/track').set(bearer(project.publicKey)).send({ event: 'signup', email: 'new-racer@example.com' }),
  );
  expect(statuses).toEqual(Array(BURST).fill(200));
  expect(await count('contacts where project_id = ? and email = ?', [project.id, 'new-racer@example.com'])).toBe(1);
  expect(
    await count(`events e join contacts c on c.id = e.contact_id where e.project_id = ? and c.email = ? and e.name = 'signup'`, [
      project.id,
      'new-racer@example.com',
    ]),
  ).toBe(BURST);
});

test('registering one domain: one 201, the rest 409, one domain', async () => {
  const statuses = await burst(() => env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: 'race.example.com' }));
  expect(statuses).toEqual([201, ...Array(BURST - 1).fill(409)]);
  expect(await count('domains where project_id = ? and domain = ?', [project.id, 'race.example.com'])).toBe(1);
});

test('adding one member: one 201, the rest 409, one membership', async () => {
  const invitee = await createTestUser(env);
  const statuses = await burst(() =>
    env.http().post(`/projects/${project.id}/members`).set('Cookie', owner.cookie).send({ email: invitee.email, role: 'MEMBER' }),
  );
  expect(statuses).toEqual([201, ...Array(BURST - 1).fill(409)]);
  expect(await count('project_members where project_id = ? and user_id = ?', [project.id, invitee.id])).toBe(1);
});

test('signing up one address: one 201, the rest 409 or 429, one user', async () => {
  const email = 'double-click@example.com';
  // A client IP of its own (trusted X-Forwarded-For from loopback): sign-ups are limited per IP,
  // and other test files sign up from 127.0.0.1 within the same minute.
  const ip = `10.77.${randomInt(256)}.${randomInt(1, 255)}`;
  const statuses = await burst(() =>
    env.http().post('/auth/signup').set('X-Forwarded-For', ip).send({ email, password: 'a long enough password' }),
  );
  expect(statuses.filter((s) => s === 201)).toHaveLength(1);
  expect(statuses.every((s) => s === 201 || s === 409 || s === 429)).toBe(true);
  expect(await count('users where email = ?', [email])).toBe(1);
});

test('adding the same addresses to a static segment, creating the missing contact: every answer 2xx, each once', async () => {
  const segment = await env.http().post('/segments').set(bearer(project.secretKey)).send({ name: 'Racers', type: 'STATIC' });
  expect(segment.status).toBe(201);
  expect((await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'member@example.com' })).status).toBe(201);
  const emails = ['member@example.com', 'brand-new-member@example.com'];
  const statuses = await burst(() =>
    env.http().post(`/segments/${segment.body.id}/members`).set(bearer(project.secretKey)).send({ emails, createMissing: true }),
  );
  expect(statuses.every((s) => s >= 200 && s < 300)).toBe(true);
  expect(await count('segment_members where segment_id = ?', [segment.body.id])).toBe(2);
  expect(await count('contacts where project_id = ? and email = ?', [project.id, 'brand-new-member@example.com'])).toBe(1);
});

test('sending to a new address many times at once: every answer 200, one contact, each email rendered for it', async () => {
  await addVerifiedDomain('send.race.test');
  // One recipient and no Idempotency-Key: the way without a transaction, whose email must not be
  // written for a contact id that lost the race to create the address (db/messages/send.ts SendBatches).
  const responses = await Promise.all(
    Array.from({ length: BURST }, (_, i) =>
      env
        .http()
        .post('/v1/send')
        .set(bearer(project.secretKey))
        .send({ to: 'Send-Racer@example.com', from: 'me@send.race.test', subject: `Hi ${i}`, body: '<p>contact {{id}}</p>', data: { n: i } }),
    ),
  );
  expect(responses.map((r) => r.status)).toEqual(Array(BURST).fill(200));
  const contacts = await query<{ id: string }>(env.orm.em.fork(), 'select id from contacts where project_id = ? and email = ?', [
    project.id,
    'send-racer@example.com',
  ]);
  expect(contacts).toHaveLength(1);
  const emails = await query<{ id: string; contact_id: string; body: string }>(
    env.orm.em.fork(),
    'select id, contact_id, body from emails where project_id = ? and to_email = ?',
    [project.id, 'send-racer@example.com'],
  );
  expect(emails).toHaveLength(BURST);
  expect(new Set(emails.map((e) => e.id))).toEqual(new Set(responses.map((r) => r.body.data.emails[0].email)));
  for (const e of emails) {
    expect(e.contact_id).toBe(contacts[0]!.id);
    expect(e.body).toContain(`contact ${contacts[0]!.id}`);
  }
  expect(responses.every((r) => r.body.data.emails[0].contact.id === contacts[0]!.id)).toBe(true);
});

test('sending one campaign: one 200, the rest 409 CAMPAIGN_NOT_DRAFT, its workflow started once', async () => {
  await addVerifiedDomain('news.race.test');
  const campaign = await env
    .http()
    .post('/campaigns')
    .set(bearer(project.secretKey))
    .send({ name: 'Race', subject: 'Hi', body: '<p>Hi</p>', from: 'me@news.race.test' });
  expect(campaign.status).toBe(201);
  await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'audience@example.com' });
  // Scheduled an hour away: this file runs no worker, and nothing needs to go out.
  const scheduledFor = new Date(Date.now() + 3600_000).toISOString();
  const responses = await Promise.all(
    Array.from({ length: BURST }, () =>
      env.http().post(`/campaigns/${campaign.body.id}/send`).set(bearer(project.secretKey)).send({ scheduledFor }),
    ),
  );
  expect(responses.map((r) => r.status).sort()).toEqual([200, ...Array(BURST - 1).fill(409)]);
  expect(responses.filter((r) => r.status === 409).every((r) => r.body.error.code === 'CAMPAIGN_NOT_DRAFT')).toBe(true);
  // The refused ones stopped at the row lock, before any workflow start: the one started runs.
  const workflowId = workflowIds.campaign(campaign.body.id);
  expect((await env.temporal.client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
  await env.temporal.client.workflow.getHandle(workflowId).terminate('test over');
});
