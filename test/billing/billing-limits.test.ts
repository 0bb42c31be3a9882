import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney, track, waitForExecution } from '../helpers/journeys';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * Monthly caps per category, enforced where emails are written: /v1/send (402, nothing queued),
 * campaign send (402) and campaign batches (FAILED beyond the cap), workflow SEND_EMAIL (not
 * delivered). Real API, Temporal, worker and SMTP sink; each scenario has its own project.
 */
let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;

beforeAll(async () => {
  sending = await startSendingEnv({ JOURNEY_TIME_SCALE: '0.001', SEND_THROTTLE_PER_SECOND: '100000' });
  ({ env, smtp } = sending);
});
afterAll(() => sending.close());

interface Setup {
  project: ProjectWithKeys;
  owner: TestUser;
  domain: string;
}

let domains = 0;
/** A project with a verified domain and a signed-in owner. */
async function setup(name: string, withDomain = true): Promise<Setup> {
  const project = await env.project(name);
  const owner = await createTestUser(env);
  await addTestMember(env, project.id, owner.id, 'OWNER');
  const domain = `billing-${++domains}-${project.id.slice(-6)}.test`;
  if (withDomain) await sending.verifiedDomain(project, domain);
  return { project, owner, domain };
}

const limitsPath = (projectId: string) => `/users/@me/projects/${projectId}/billing-limits`;
const consumptionPath = (projectId: string) => `/users/@me/projects/${projectId}/billing-consumption`;

async function setLimits(s: Setup, limits: Record<string, number | null>) {
  const res = await env.http().put(limitsPath(s.project.id)).set('Cookie', s.owner.cookie).send(limits);
  expect(res.status).toBe(200);
  return res.body;
}

async function consumption(s: Setup, month?: string) {
  const res = await env
    .http()
    .get(consumptionPath(s.project.id) + (month ? `?month=${month}` : ''))
    .set('Cookie', s.owner.cookie);
  expect(res.status).toBe(200);
  return res.body as {
    period: { start: string; end: string };
    categories: Record<string, { used: number; limit: number | null; refused: number }>;
    total: number;
  };
}

const send = (s: Setup, to: string | string[]) =>
  env.http().post('/v1/send').set(bearer(s.project.secretKey)).send({ to, from: `hello@${s.domain}`, subject: 'Hi', body: '<p>Hi</p>' });

const emailRows = (projectId: string, source: string) =>
  query<{ to_email: string; status: string; error: string | null }>(
    env.orm.em.fork(),
    'select to_email, status, error from emails where project_id = ? and source = ? order by to_email',
    [projectId, source],
  );

const contactExists = async (projectId: string, email: string) =>
  (await queryOne(env.orm.em.fork(), 'select 1 from contacts where project_id = ? and email = ?', [projectId, email])) !== undefined;

describe('limits and consumption API', () => {
  test('any member reads, OWNER/ADMIN set, null removes a cap, bad bodies 422, outsiders 403', async () => {
    const s = await setup('limits api', false);
    const admin = await createTestUser(env);
    const member = await createTestUser(env);
    const outsider = await createTestUser(env);
    await addTestMember(env, s.project.id, admin.id, 'ADMIN');
    await addTestMember(env, s.project.id, member.id, 'MEMBER');
    const path = limitsPath(s.project.id);

    expect((await env.http().get(path).set('Cookie', member.cookie)).body).toEqual({ transactional: null, campaign: null, workflow: null });
    expect((await env.http().put(path).set('Cookie', admin.cookie).send({ transactional: 100, campaign: 0 })).body).toEqual({
      transactional: 100,
      campaign: 0,
      workflow: null,
    });
    // Omitted categories keep their cap; null removes one.
    expect((await env.http().put(path).set('Cookie', s.owner.cookie).send({ campaign: null, workflow: 7 })).body).toEqual({
      transactional: 100,
      campaign: null,
      workflow: 7,
    });

    const denied = await env.http().put(path).set('Cookie', member.cookie).send({ transactional: 1 });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('FORBIDDEN');
    const outside = await env.http().get(path).set('Cookie', outsider.cookie);
    expect(outside.status).toBe(403);
    expect(outside.body.error.code).toBe('PROJECT_ACCESS_DENIED');
    expect((await env.http().get(path)).status).toBe(401);

    for (const [body, field] of [
      [{ transactional: -1 }, 'transactional'],
      [{ campaign: 1.5 }, 'campaign'],
      [{ workflow: '10' }, 'workflow'],
      [{ transactionl: 10 }, ''],
      [{ transactional: 2 ** 31 }, 'transactional'],
    ] as const) {
      const res = await env.http().put(path).set('Cookie', s.owner.cookie).send(body);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      if (field) expect(res.body.error.errors[0].field).toBe(field);
    }
    // Nothing of a refused PUT applied.
    expect((await env.http().get(path).set('Cookie', member.cookie)).body).toEqual({ transactional: 100, campaign: null, workflow: 7 });

    const now = new Date();
    const current = await consumption(s);
    const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    expect(current.period.start).toBe(start.toISOString());
    expect(current.categories).toEqual({
      transactional: { used: 0, limit: 100, refused: 0 },
      campaign: { used: 0, limit: null, refused: 0 },
      workflow: { used: 0, limit: 7, refused: 0 },
    });
    const past = await consumption(s, '2000-12');
    expect(past.period).toEqual({ start: '2000-12-01T00:00:00.000Z', end: '2001-01-01T00:00:00.000Z' });
    const bad = await env.http().get(`${consumptionPath(s.project.id)}?month=2026-13`).set('Cookie', member.cookie);
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toBe('month');
  });
});

describe('/v1/send', () => {
  test('cap N: N sends pass, the next is 402 BILLING_LIMIT_EXCEEDED and writes nothing', async () => {
    const s = await setup('send cap');
    await setLimits(s, { transactional: 3, campaign: 0 });
    for (const to of ['a@example.org', 'b@example.org']) expect((await send(s, to)).status).toBe(200);

    // Two recipients with one left: the whole request is refused, neither contact is created.
    const pair = await send(s, ['c@example.org', 'd@example.org']);
    expect(pair.status).toBe(402);
    expect(pair.body.error.code).toBe('BILLING_LIMIT_EXCEEDED');
    expect(pair.body.error.message).toMatch(/transactional/);
    expect(pair.body.error.message).toMatch(/2 of 3 used/);
    expect(pair.body.error.suggestion).toMatch(/billing-limits/);
    expect(await contactExists(s.project.id, 'c@example.org')).toBe(false);

    expect((await send(s, 'c@example.org')).status).toBe(200);
    const over = await send(s, 'e@example.org');
    expect(over.status).toBe(402);
    expect(over.body.error.code).toBe('BILLING_LIMIT_EXCEEDED');
    expect((await emailRows(s.project.id, 'transactional')).map((r) => r.to_email)).toEqual(['a@example.org', 'b@example.org', 'c@example.org']);
    expect(await contactExists(s.project.id, 'e@example.org')).toBe(false);
    expect((await consumption(s)).categories.transactional).toEqual({ used: 3, limit: 3, refused: 0 });

    // The three were delivered; raising the cap lets sends through again.
    await waitUntil(async () => smtp.messages.filter((m) => m.envelope.from.endsWith(`@${s.domain}`)).length === 3);
    await setLimits(s, { transactional: 4 });
    expect((await send(s, 'e@example.org')).status).toBe(200);
    expect((await consumption(s)).total).toBe(4);
  });

  test('a project reset keeps what was consumed: the cap is not refilled, earlier months keep their counts', async () => {
    const s = await setup('reset keeps consumption');
    await setLimits(s, { transactional: 3 });
    for (const to of ['r1@example.org', 'r2@example.org']) expect((await send(s, to)).status).toBe(200);
    await waitUntil(async () => smtp.messages.filter((m) => m.envelope.from.endsWith(`@${s.domain}`)).length === 2);
    // A campaign email of an earlier month, and one the cap refused there.
    const contact = await env.http().post('/contacts').set(bearer(s.project.secretKey)).send({ email: 'old@example.org' });
    for (const error of [null, 'BILLING_LIMIT_EXCEEDED']) {
      await query(
        env.orm.em.fork(),
        `insert into emails (id, project_id, contact_id, source, marketing, to_email, from_email, subject, body, headers, status, error, created_at)
         values (gen_random_uuid(), ?, ?, 'campaign', true, 'old@example.org', ?, 'Old', 'Old', '{}', 'SENT', ?, '2026-10-15T12:00:00Z')`,
        [s.project.id, contact.body.id, `hello@${s.domain}`, error],
      );
    }

    const reset = await env
      .http()
      .post(`/users/@me/projects/${s.project.id}/reset`)
      .set('Cookie', s.owner.cookie)
      .send({ confirm: 'reset keeps consumption' });
    expect(reset.status).toBe(200);
    expect(reset.body.deleted.emails).toBe(4);
    expect(await emailRows(s.project.id, 'transactional')).toEqual([]);

    expect((await consumption(s)).categories.transactional).toEqual({ used: 2, limit: 3, refused: 0 });
    expect((await consumption(s, '2026-10')).categories.campaign).toEqual({ used: 1, limit: null, refused: 1 });
    const pair = await send(s, ['r3@example.org', 'r4@example.org']);
    expect(pair.status).toBe(402);
    expect(pair.body.error.message).toMatch(/2 of 3 used/);
    expect((await send(s, 'r3@example.org')).status).toBe(200);
    expect((await consumption(s)).categories.transactional).toEqual({ used: 3, limit: 3, refused: 0 });
    expect((await send(s, 'r4@example.org')).status).toBe(402);
  });

  test('concurrent requests cannot overshoot: cap 5, 16 at once → exactly 5 accepted and 5 rows', async () => {
    const s = await setup('send race');
    await setLimits(s, { transactional: 5 });
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => send(s, `race-${i}@example.org`)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((x) => x === 200)).toHaveLength(5);
    expect(statuses.filter((x) => x === 402)).toHaveLength(11);
    expect(await emailRows(s.project.id, 'transactional')).toHaveLength(5);
  });
});

describe('campaigns', () => {
  async function campaignFor(s: Setup, contacts: string[]) {
    for (const email of contacts) {
      expect((await env.http().post('/contacts').set(bearer(s.project.secretKey)).send({ email })).status).toBe(201);
    }
    const res = await env
      .http()
      .post('/campaigns')
      .set(bearer(s.project.secretKey))
      .send({ name: 'Capped', subject: 'News', body: '<p>News for {{email}}</p>', from: `news@${s.domain}` });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  test('a send whose audience exceeds what the cap leaves is refused with 402 and stays DRAFT; so is a test copy', async () => {
    const s = await setup('campaign refused');
    const id = await campaignFor(s, ['c1@example.org', 'c2@example.org', 'c3@example.org']);
    await setLimits(s, { campaign: 2 });
    const res = await env.http().post(`/campaigns/${id}/send`).set(bearer(s.project.secretKey)).send({});
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe('BILLING_LIMIT_EXCEEDED');
    expect(res.body.error.message).toMatch(/campaign/);
    expect(res.body.error.message).toMatch(/needs 3/);
    expect((await env.http().get(`/campaigns/${id}`).set(bearer(s.project.secretKey))).body.status).toBe('DRAFT');
    expect(await emailRows(s.project.id, 'campaign')).toEqual([]);

    await setLimits(s, { campaign: 0 });
    const testCopy = await env.http().post(`/campaigns/${id}/test`).set(bearer(s.project.secretKey)).send({ email: 'me@example.org' });
    expect(testCopy.status).toBe(402);
    expect(await emailRows(s.project.id, 'campaign')).toEqual([]);
  });

  test('a batch never writes past the cap: lowered before a scheduled send, the rest are FAILED BILLING_LIMIT_EXCEEDED', async () => {
    const s = await setup('campaign batch');
    const recipients = ['b1@example.org', 'b2@example.org', 'b3@example.org', 'b4@example.org', 'b5@example.org'];
    const id = await campaignFor(s, recipients);
    await setLimits(s, { campaign: 5 });
    const scheduledFor = new Date(Date.now() + 3000).toISOString();
    const scheduled = await env.http().post(`/campaigns/${id}/send`).set(bearer(s.project.secretKey)).send({ scheduledFor });
    expect(scheduled.status).toBe(200);
    expect(scheduled.body.status).toBe('SCHEDULED');
    await setLimits(s, { campaign: 2 });

    await waitUntil(async () => (await queryOne<{ status: string }>(env.orm.em.fork(), 'select status from campaigns where id = ?', [id]))?.status === 'SENT', 30_000);
    const rows = await emailRows(s.project.id, 'campaign');
    expect(rows.filter((r) => r.status === 'SENT').length).toBe(2);
    const refused = rows.filter((r) => r.status === 'FAILED');
    expect(refused).toHaveLength(3);
    for (const r of refused) expect(r.error).toBe('BILLING_LIMIT_EXCEEDED');
    const delivered = smtp.messages.filter((m) => m.envelope.from === `news@${s.domain}`).map((m) => m.envelope.to[0]);
    expect(delivered.sort()).toEqual(rows.filter((r) => r.status === 'SENT').map((r) => r.to_email));
    const recipientStates = await query<{ status: string; n: string }>(
      env.orm.em.fork(),
      'select status, count(*) as n from campaign_recipients where campaign_id = ? group by status order by status',
      [id],
    );
    expect(recipientStates.map((r) => [r.status, Number(r.n)])).toEqual([['FAILED', 3], ['SENT', 2]]);
    expect((await consumption(s)).categories.campaign).toEqual({ used: 2, limit: 2, refused: 3 });
  });
});

describe('workflows', () => {
  test('SEND_EMAIL over the cap: not delivered, recorded FAILED, the step completes as skipped', async () => {
    const s = await setup('workflow cap');
    const tpl = await env
      .http()
      .post('/templates')
      .set(bearer(s.project.secretKey))
      .send({ name: 'hello', subject: 'Hello', body: '<p>Hello {{email}}</p>', from: `flow@${s.domain}` });
    expect(tpl.status).toBe(201);
    const wf = await buildJourney(env, s.project, {
      eventName: 'joined',
      steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } }],
      transitions: [['trigger', 'mail']],
    });
    await setLimits(s, { workflow: 1 });

    const first = await track(env, s.project, 'w1@example.org', 'joined');
    const done1 = await waitForExecution(env, s.project, wf.id, first.contact, ['COMPLETED', 'FAILED']);
    expect(done1.status).toBe('COMPLETED');
    await waitUntil(async () => smtp.messages.some((m) => m.envelope.to.includes('w1@example.org')));

    const second = await track(env, s.project, 'w2@example.org', 'joined');
    const done2 = await waitForExecution(env, s.project, wf.id, second.contact, ['COMPLETED', 'FAILED']);
    expect(done2.status).toBe('COMPLETED');
    const step = done2.steps!.find((x) => x.stepType === 'SEND_EMAIL')!;
    expect(step.output).toEqual({ skipped: 'BILLING_LIMIT_EXCEEDED' });
    expect(await emailRows(s.project.id, 'workflow')).toEqual([
      { to_email: 'w1@example.org', status: 'SENT', error: null },
      { to_email: 'w2@example.org', status: 'FAILED', error: 'BILLING_LIMIT_EXCEEDED' },
    ]);
    // FAILED is final: that email is never offered to the relay.
    expect(smtp.messages.some((m) => m.envelope.to.includes('w2@example.org'))).toBe(false);
    expect((await consumption(s)).categories.workflow).toEqual({ used: 1, limit: 1, refused: 1 });
  });
});
