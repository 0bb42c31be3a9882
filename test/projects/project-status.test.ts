import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { KEY_MAX_AGE_MS } from '../../api/middleware/api-keys';
import { newId } from '../../db/ids';
import { disableProject } from '../../db/projects/security';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { addTestMember, asMember, createTestUser } from '../helpers/accounts';
import { bearer, type TestEnv } from '../helpers/env';
import { deliveriesSettled, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

jest.setTimeout(120_000);

const NOTIFY_SECRET = 'project-status-notify-secret-0123';
let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;

/** The API's clock: a change the CLI (another process) makes holds there once its readings of keys are this old. */
let offset = 0;
const keyReadingsAged = () => (offset += KEY_MAX_AGE_MS);

beforeAll(async () => {
  // A slow throttle, so a campaign is still sending when its project is disabled.
  sending = await startSendingEnv({ NOTIFY_SECRET, SEND_THROTTLE_PER_SECOND: '20' }, { clock: () => new Date(Date.now() + offset) });
  ({ env, smtp } = sending);
});
afterAll(() => sending.close());

const em = () => env.orm.em.fork();
const received = (domain: string) => smtp.messages.filter((m) => m.envelope.from.endsWith(`@${domain}`)).length;
const projectRow = async (id: string) =>
  (await queryOne<{ disabled: boolean; disabled_reason: string | null }>(em(), 'select disabled, disabled_reason from projects where id = ?', [id]))!;

/** `count` emails the relay accepted, written directly (the send path has its own tests). */
async function sentEmails(projectId: string, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => randomUUID());
  await query(
    em(),
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, sent_at)
     select id, ?, 'transactional', 'r-' || n || '@example.com', 'me@x.test', 's', 'b', 'SENT', now()
     from unnest(?::uuid[]) with ordinality as t(id, n)`,
    [projectId, ids],
  );
  return ids;
}

const notify = (events: object[]) => env.http().post('/webhooks/notify').set({ Authorization: `Bearer ${NOTIFY_SECRET}` }).send(events);
const bounce = (ids: string[]) => notify(ids.map((emailId) => ({ type: 'bounced', emailId, bounceType: 'hard' })));

test('a disabled project refuses writes with 403 PROJECT_DISABLED and still answers reads', async () => {
  const project = await env.project();
  const user = await createTestUser(env);
  await addTestMember(env, project.id, user.id, 'OWNER');
  await disableProject(em(), project.id, 'testing');
  for (const res of [
    await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'a@b.io' }),
    await env.http().post('/contacts').set(asMember(user, project.id)).send({ email: 'a@b.io' }),
    await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to: 'a@b.io', from: 'me@x.test', subject: 's', body: 'b' }),
  ]) {
    expect([res.status, res.body.error.code]).toEqual([403, 'PROJECT_DISABLED']);
  }
  expect((await env.http().get('/contacts').set(bearer(project.secretKey))).status).toBe(200);
  const security = await env.http().get(`/users/@me/projects/${project.id}/security`).set({ Cookie: user.cookie });
  expect(security.body).toMatchObject({ disabled: true, disabledReason: 'testing', suspensions: [{ reason: 'testing', liftedAt: null }] });
});

test("a disabled project's queued email is not handed to the relay: it ends FAILED with 'project disabled'", async () => {
  const project = await env.project();
  const domain = `${project.id.slice(-10)}.status.test`;
  await sending.verifiedDomain(project, domain);
  // Queued while enabled, delivered after the project was disabled.
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: ['one@example.com', 'two@example.com'], from: `me@${domain}`, subject: 'Hi', body: 'Hello' });
  expect(res.status).toBe(200);
  await waitUntil(async () => received(domain) === 2);

  const emailId = randomUUID();
  await query(
    em(),
    `insert into emails (id, project_id, source, to_email, from_email, subject, body) values (?, ?, 'transactional', 'three@example.com', ?, 's', 'b')`,
    [emailId, project.id, `me@${domain}`],
  );
  await disableProject(em(), project.id, 'testing');
  // Only now handed to the delivery engine.
  await query(em(), 'update emails set queue = ? where id = ?', [env.taskQueue, emailId]);
  env.deps.wakeups.emails(env.taskQueue);
  const failed = await waitUntil(async () => {
    const row = await queryOne<{ status: string; error: string }>(em(), 'select status, error from emails where id = ?', [emailId]);
    return row?.status === 'FAILED' ? row : undefined;
  });
  expect(failed.error).toBe('project disabled');
  expect(received(domain)).toBe(2);
});

async function campaignTo(project: ProjectWithKeys, domain: string, contacts: number, scheduledFor?: string): Promise<string> {
  const rows = Array.from({ length: contacts }, (_, i) => ({ id: newId('cnt'), email: `c${i}@example.com` }));
  await query(
    em(),
    `insert into contacts (id, project_id, email, subscribed) select r.id, ?, r.email, true from jsonb_to_recordset(?::jsonb) as r(id text, email text)`,
    [project.id, JSON.stringify(rows)],
  );
  const key = bearer(project.secretKey);
  const created = await env.http().post('/campaigns').set(key).send({ name: 'Big', subject: 'News', body: 'Hello', from: `me@${domain}` });
  expect(created.status).toBe(201);
  const sent = await env.http().post(`/campaigns/${created.body.id}/send`).set(key).send(scheduledFor ? { scheduledFor } : {});
  expect(sent.status).toBe(200);
  return created.body.id as string;
}

const campaignState = (id: string) =>
  queryOne<{ status: string; error: string | null }>(em(), 'select status, error from campaigns where id = ?', [id]);

test('a campaign stops when its project is disabled mid-send: CANCELLED with the reason, the rest of the audience not mailed', async () => {
  const project = await env.project();
  const domain = `${project.id.slice(-10)}.campaign.test`;
  await sending.verifiedDomain(project, domain);
  const campaignId = await campaignTo(project, domain, 200);
  await waitUntil(async () => received(domain) >= 10);
  await disableProject(em(), project.id, 'operator stop');

  const final = await waitUntil(async () => {
    const c = await campaignState(campaignId);
    return c?.status === 'CANCELLED' ? c : undefined;
  });
  expect(final.error).toBe('project disabled');
  // Its workflow has closed (the running batch stopped first) and none of its emails waits for
  // delivery: what the relay has now is all it will get, and each of those is recorded SENT.
  const workflow = env.temporal.client.workflow.getHandle(`campaign:${campaignId}`);
  await waitUntil(async () => (await workflow.describe()).status.name !== 'RUNNING');
  await deliveriesSettled(env, 'campaign_id = ?', [campaignId]);
  const delivered = received(domain);
  const sent = await queryOne<{ n: number }>(em(), 'select count(*)::int as n from emails where campaign_id = ? and sent_at is not null', [campaignId]);
  expect(sent!.n).toBe(delivered);
  expect(delivered).toBeLessThan(100);
  // Nothing is left queued for the rest of the audience.
  const queued = await queryOne<{ n: number }>(em(), `select count(*)::int as n from emails where campaign_id = ? and status = 'QUEUED'`, [campaignId]);
  expect(queued!.n).toBe(0);
});

test('a scheduled campaign of a project disabled before its time sends nothing', async () => {
  const project = await env.project();
  const domain = `${project.id.slice(-10)}.later.test`;
  await sending.verifiedDomain(project, domain);
  const campaignId = await campaignTo(project, domain, 5, new Date(Date.now() + 2000).toISOString());
  await disableProject(em(), project.id, 'operator stop');
  const final = await waitUntil(async () => {
    const c = await campaignState(campaignId);
    return c?.status === 'CANCELLED' ? c : undefined;
  });
  expect(final.error).toBe('project disabled');
  expect(received(domain)).toBe(0);
});

test('hard bounces over 10% of at least 100 emails disable the project, with a suspension holding the figures', async () => {
  const project = await env.project();
  const ids = await sentEmails(project.id, 100);
  // 10 of 100 is not over 10%.
  expect((await bounce(ids.slice(0, 10))).status).toBe(200);
  expect((await projectRow(project.id)).disabled).toBe(false);
  expect((await bounce(ids.slice(10, 11))).status).toBe(200);
  const row = await projectRow(project.id);
  expect(row.disabled).toBe(true);
  expect(row.disabled_reason).toBe('Bounce rate 11.00% over 100 emails exceeds 10.00%');

  const security = await env.http().get(`/projects/${project.id}/security`).set(bearer(project.secretKey));
  expect(security.body).toMatchObject({
    disabled: true,
    allTime: { sent: 100, bounced: 11, complained: 0, bounceRate: 0.11 },
    last7Days: { sent: 100, bounced: 11 },
    suspensions: [{ reason: row.disabled_reason, liftedAt: null, details: { rule: 'bounce_rate', sent: 100, bounced: 11 } }],
  });
  // One suspension however many bounces follow.
  await bounce(ids.slice(11, 20));
  expect(await queryOne<{ n: number }>(em(), 'select count(*)::int as n from project_suspensions where project_id = ?', [project.id])).toEqual({ n: 1 });
});

test('complaints over 0.5% disable the project; below 100 emails nothing is disabled', async () => {
  const small = await env.project();
  const few = await sentEmails(small.id, 50);
  await bounce(few.slice(0, 25));
  expect((await projectRow(small.id)).disabled).toBe(false);

  const project = await env.project();
  const ids = await sentEmails(project.id, 200);
  // 1 of 200 is 0.5%: not over it.
  expect((await notify([{ type: 'complained', emailId: ids[0] }])).status).toBe(200);
  expect((await projectRow(project.id)).disabled).toBe(false);
  await notify([{ type: 'complained', emailId: ids[1] }]);
  expect(await projectRow(project.id)).toEqual({ disabled: true, disabled_reason: 'Complaint rate 1.00% over 200 emails exceeds 0.50%' });
});

// ---- The operator's CLI -------------------------------------------------------------------------

const ROOT = path.resolve(__dirname, '../..');
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), ['cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: process.env.TEST_DATABASE_URL, LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('tidings project disable / enable: the operator switch, recorded as a suspension; enabling starts the rule afresh', async () => {
  const project = await env.project();
  const ids = await sentEmails(project.id, 100);
  await bounce(ids.slice(0, 11));
  expect((await projectRow(project.id)).disabled).toBe(true);

  const enabled = await cli(['project', 'enable', project.id]);
  expect(enabled.code).toBe(0);
  keyReadingsAged();
  expect(JSON.parse(enabled.stdout)).toEqual({ id: project.id, disabled: false, changed: true });
  expect(await projectRow(project.id)).toEqual({ disabled: false, disabled_reason: null });
  expect((await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'a@b.io' })).status).toBe(201);
  // The bounces before the lift no longer count: one more does not disable it again.
  await bounce(ids.slice(11, 12));
  expect((await projectRow(project.id)).disabled).toBe(false);

  const disabled = await cli(['project', 'disable', project.id, '--reason', 'abuse report #12']);
  expect(disabled.code).toBe(0);
  keyReadingsAged();
  expect(JSON.parse(disabled.stdout)).toEqual({ id: project.id, disabled: true, changed: true });
  expect(await projectRow(project.id)).toEqual({ disabled: true, disabled_reason: 'abuse report #12' });
  const refused = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'b@b.io' });
  expect([refused.status, refused.body.error.code]).toEqual([403, 'PROJECT_DISABLED']);
  const suspensions = await query<{ reason: string; lifted: boolean }>(
    em(),
    'select reason, lifted_at is not null as lifted from project_suspensions where project_id = ? order by created_at',
    [project.id],
  );
  expect(suspensions).toEqual([
    { reason: 'Bounce rate 11.00% over 100 emails exceeds 10.00%', lifted: true },
    { reason: 'abuse report #12', lifted: false },
  ]);

  const unknown = await cli(['project', 'enable', 'prj_nope']);
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toContain('No project with id "prj_nope"');
  const noId = await cli(['project', 'disable']);
  expect(noId.code).toBe(1);
  expect(noId.stderr).toContain('project disable needs a project id');
});
