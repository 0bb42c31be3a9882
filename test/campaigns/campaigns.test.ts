import { simpleParser } from 'mailparser';
import { markCampaignForSending } from '../../db/campaigns/campaigns';
import { newId } from '../../db/ids';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { setThrottleRate } from '../../db/messages/send-throttle';
import { query, queryOne } from '../../db/sql';
import { loadConfig } from '../../config';
import { TemporalGateway } from '../../temporal/client';
import { startCampaign } from '../../temporal/campaigns/lifecycle';
import type { DnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { deliveriesSettled, type Domain, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpMessage, SmtpSink } from '../helpers/smtp';
import { childWorkerEnv, spawnWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/**
 * Campaigns over the real stack: the API, Temporal, a worker (in-process, and for the restart test
 * a child process killed with SIGKILL) and an SMTP sink. Every scenario has its own project (a
 * campaign with no segment goes to every subscribed contact of its project) and its own recipient
 * prefix, so the sink's messages can be told apart.
 *
 * TEST_CAMPAIGN_CONTACTS (default 2000) sizes the bulk campaign; 20000 runs it at the size of the
 * issue (about 40 s more on 2 cores). bench/campaign.ts sends 100,000.
 */
const BULK = Number(process.env.TEST_CAMPAIGN_CONTACTS ?? 2000);
const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[campaigns] ${msg}\n`);

let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let dns: DnsServer;

interface Campaign {
  id: string;
  name: string;
  status: string;
  scheduledFor: string | null;
  sentAt: string | null;
  totalRecipients: number;
  segmentId: string | null;
  type: string;
  stats: Record<string, number>;
  [key: string]: unknown;
}

const auth = (p: ProjectWithKeys) => bearer(p.secretKey);

/** Inserts `n` contacts `<prefix>-<i>@example.org` at once; every `unsubscribedEvery`-th one unsubscribed. */
async function seedContacts(project: ProjectWithKeys, prefix: string, n: number, unsubscribedEvery = 0) {
  const rows = Array.from({ length: n }, (_, i) => ({
    id: newId('cnt'),
    email: `${prefix}-${i}@example.org`,
    subscribed: !(unsubscribedEvery > 0 && i % unsubscribedEvery === 0),
    data: { n: i, first: `Name${i}` },
  }));
  await query(
    env.orm.em.fork(),
    `insert into contacts (id, project_id, email, subscribed, data)
     select id, ?, email, subscribed, data from jsonb_to_recordset(?::jsonb) as r(id text, email text, subscribed boolean, data jsonb)`,
    [project.id, JSON.stringify(rows)],
  );
  return rows;
}

const recipientOf = (m: SmtpMessage) => m.envelope.to[0] ?? '';
const mailTo = (prefix: string) => smtp.messages.filter((m) => recipientOf(m).startsWith(`${prefix}-`));
const subjectOf = (m: SmtpMessage) => /^Subject: (.*)$/im.exec(m.raw.toString('utf8'))?.[1]?.trim();

/** Every address at most once; returns how many distinct addresses got mail. */
function expectNoDuplicates(messages: SmtpMessage[]): Set<string> {
  const seen = new Map<string, number>();
  for (const m of messages) seen.set(recipientOf(m), (seen.get(recipientOf(m)) ?? 0) + 1);
  const twice = [...seen].filter(([, n]) => n > 1);
  expect(twice).toEqual([]);
  return new Set(seen.keys());
}

async function createCampaign(e: TestEnv, project: ProjectWithKeys, domain: string, extra: Record<string, unknown> = {}) {
  const res = await e
    .http()
    .post('/campaigns')
    .set(auth(project))
    .send({
      name: 'Launch',
      subject: 'Hello {{first ?? "friend"}}',
      body: '<p>Hi {{first ?? "friend"}}, number {{n}}.</p>',
      from: `news@${domain}`,
      fromName: 'Acme News',
      ...extra,
    });
  expect(res.status).toBe(201);
  return res.body as Campaign;
}

const getCampaign = async (e: TestEnv, project: ProjectWithKeys, id: string) =>
  (await e.http().get(`/campaigns/${id}`).set(auth(project))).body as Campaign;

/** Polls the row (cheap), then returns the campaign as the API shows it. */
const waitForStatus = async (e: TestEnv, project: ProjectWithKeys, id: string, status: string, timeoutMs = 30_000) => {
  await waitUntil(async () => {
    const row = await queryOne<{ status: string }>(e.orm.em.fork(), 'select status from campaigns where id = ?', [id]);
    return row?.status === status;
  }, timeoutMs);
  return getCampaign(e, project, id);
};

/** The campaign's workflow has closed (nothing of it can send any more). */
const workflowClosed = (e: TestEnv, id: string) =>
  waitUntil(async () => {
    const d = await e.temporal.client.workflow.getHandle(`campaign:${id}`).describe();
    return d.status.name !== 'RUNNING';
  }, 30_000);

/** The activities the campaign's workflow scheduled, by type, in order (its current run). */
const activitiesOf = async (id: string) =>
  ((await env.temporal.client.workflow.getHandle(`campaign:${id}`).fetchHistory()).events ?? []).flatMap((e) =>
    e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType?.name] : [],
  );

const emailCounts = async (campaignId: string) => {
  const rows = await query<{ status: string; n: string }>(
    env.orm.em.fork(),
    'select status, count(*) as n from emails where campaign_id = ? group by status',
    [campaignId],
  );
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
};

beforeAll(async () => {
  // Fast by default (the throttle itself is exercised with a per-project rate below).
  sending = await startSendingEnv({ SEND_THROTTLE_PER_SECOND: '100000' });
  ({ env, smtp, dns } = sending);
});

afterAll(() => sending.close());

describe('API and states', () => {
  let project: ProjectWithKeys;
  const DOMAIN = 'cmp-api.test';

  beforeAll(async () => {
    project = await env.project('campaigns api');
    await sending.verifiedDomain(project, DOMAIN);
  });

  test('create, get, list, PUT, duplicate, delete, and the refusals', async () => {
    const http = () => env.http();
    const unverified = await http().post('/campaigns').set(auth(project)).send({ name: 'x', subject: 's', body: 'b', from: 'a@elsewhere.test' });
    expect(unverified.status).toBe(403);
    expect(unverified.body.error.code).toBe('DOMAIN_NOT_VERIFIED');
    const invalid = await http().post('/campaigns').set(auth(project)).send({ name: 'x', body: '{{#if a}}open', from: `a@${DOMAIN}` });
    expect(invalid.status).toBe(422);
    expect(invalid.body.error.errors.map((e: { field: string }) => e.field).sort()).toEqual(['body', 'subject']);

    const created = await createCampaign(env, project, DOMAIN, { description: 'first', replyTo: `reply@${DOMAIN}` });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^cmp_/),
      name: 'Launch',
      description: 'first',
      from: `news@${DOMAIN}`,
      fromName: 'Acme News',
      replyTo: `reply@${DOMAIN}`,
      type: 'MARKETING',
      segmentId: null,
      status: 'DRAFT',
      scheduledFor: null,
      startedAt: null,
      sentAt: null,
      totalRecipients: 0,
    });
    expect(created.stats).toEqual({
      totalRecipients: 0, sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0, unsubscribed: 0,
      openRate: 0, clickRate: 0, bounceRate: 0,
    });
    expect(await getCampaign(env, project, created.id)).toEqual(created);
    const list = await http().get('/campaigns?limit=5').set(auth(project));
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ hasMore: false, total: 1 });
    expect(list.body.data[0].id).toBe(created.id);

    // PUT replaces: what is left out goes back to its default; read-only fields sent back are ignored.
    const put = await http()
      .put(`/campaigns/${created.id}`)
      .set(auth(project))
      .send({ ...created, name: 'Launch v2', description: undefined, replyTo: null, status: 'SENT', stats: {} });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ name: 'Launch v2', description: null, replyTo: null, status: 'DRAFT' });
    const putBad = await http().put(`/campaigns/${created.id}`).set(auth(project)).send({ ...created, subject: '{{oops' });
    expect(putBad.status).toBe(422);
    const putSchedule = await http()
      .put(`/campaigns/${created.id}`)
      .set(auth(project))
      .send({ ...created, scheduledFor: new Date(Date.now() + 3600_000).toISOString() });
    expect(putSchedule.status).toBe(422);
    expect(putSchedule.body.error.errors[0].field).toBe('scheduledFor');
    const putUnverified = await http().put(`/campaigns/${created.id}`).set(auth(project)).send({ ...created, from: 'a@elsewhere.test' });
    expect(putUnverified.status).toBe(403);

    const dup = await http().post(`/campaigns/${created.id}/duplicate`).set(auth(project));
    expect(dup.status).toBe(201);
    expect(dup.body).toMatchObject({ name: 'Launch v2 (copy)', status: 'DRAFT', subject: created.subject, from: created.from });
    expect(dup.body.id).not.toBe(created.id);

    // No subscribed contact yet: nothing to send to.
    const empty = await http().post(`/campaigns/${created.id}/send`).set(auth(project)).send({});
    expect(empty.status).toBe(422);
    expect(empty.body.error.errors[0]).toMatchObject({ field: 'segmentId', code: 'no_recipients' });
    await seedContacts(project, 'api', 3, 3); // api-0 unsubscribed
    const past = await http()
      .post(`/campaigns/${created.id}/send`)
      .set(auth(project))
      .send({ scheduledFor: new Date(Date.now() - 60_000).toISOString() });
    expect(past.status).toBe(422);
    expect(past.body.error.errors[0].field).toBe('scheduledFor');
    const notDate = await http().post(`/campaigns/${created.id}/send`).set(auth(project)).send({ scheduledFor: 'tomorrow' });
    expect(notDate.status).toBe(422);
    expect((await getCampaign(env, project, created.id)).status).toBe('DRAFT');

    // SCHEDULED: editable, not deletable, not sendable again; cancel → CANCELLED, final.
    const at = new Date(Date.now() + 3600_000).toISOString();
    const scheduled = await http().post(`/campaigns/${created.id}/send`).set(auth(project)).send({ scheduledFor: at });
    expect(scheduled.status).toBe(200);
    expect(scheduled.body).toMatchObject({ status: 'SCHEDULED', scheduledFor: at, totalRecipients: 2 });
    const edit = await http().put(`/campaigns/${created.id}`).set(auth(project)).send({ ...created, name: 'Launch v3', scheduledFor: at });
    expect(edit.status).toBe(200);
    expect(edit.body).toMatchObject({ name: 'Launch v3', status: 'SCHEDULED', scheduledFor: at });
    const del = await http().delete(`/campaigns/${created.id}`).set(auth(project));
    expect(del.status).toBe(409);
    expect(del.body.error.code).toBe('CAMPAIGN_ACTIVE');
    const again = await http().post(`/campaigns/${created.id}/send`).set(auth(project)).send({});
    expect(again.status).toBe(409);
    const cancel = await http().post(`/campaigns/${created.id}/cancel`).set(auth(project));
    expect(cancel.status).toBe(200);
    expect(cancel.body.status).toBe('CANCELLED');
    expect((await http().post(`/campaigns/${created.id}/cancel`).set(auth(project))).status).toBe(409);
    expect((await http().put(`/campaigns/${created.id}`).set(auth(project)).send(created)).status).toBe(409);
    expect((await http().post(`/campaigns/${created.id}/send`).set(auth(project)).send({})).status).toBe(409);
    await workflowClosed(env, created.id);
    expect((await getCampaign(env, project, created.id)).status).toBe('CANCELLED');
    // A draft cannot be cancelled; ended campaigns can be deleted.
    expect((await http().post(`/campaigns/${dup.body.id}/cancel`).set(auth(project))).status).toBe(409);
    expect((await http().delete(`/campaigns/${created.id}`).set(auth(project))).status).toBe(200);
    expect((await http().get(`/campaigns/${created.id}`).set(auth(project))).status).toBe(404);
    expect((await http().delete(`/campaigns/${dup.body.id}`).set(auth(project))).status).toBe(200);

    // Another project sees none of it.
    const other = await env.project('campaigns other');
    expect((await http().get(`/campaigns/${dup.body.id}`).set(auth(other))).status).toBe(404);
  });

  test('test send: one rendered copy, the campaign unchanged; then a real send with stats', async () => {
    const c = await createCampaign(env, project, DOMAIN, { name: 'Stats' });
    const res = await env.http().post(`/campaigns/${c.id}/test`).set(auth(project)).send({ email: 'API-1@example.org' });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ email: 'api-1@example.org', status: 'QUEUED' });
    const [copy] = await waitUntil(async () => {
      const got = mailTo('api');
      return got.length ? got : undefined;
    });
    const parsed = await simpleParser(copy!.raw);
    expect(parsed.subject).toBe('Hello Name1'); // rendered with that contact's data
    expect(parsed.html).toContain('Hi Name1, number 1.');
    expect(copy!.raw.toString('utf8')).toMatch(/^List-Unsubscribe:\s+<http:\/\/localhost:3000\/unsubscribe\//im);
    const after = await getCampaign(env, project, c.id);
    expect(after).toMatchObject({ status: 'DRAFT', totalRecipients: 0 });
    expect(after.stats.sent).toBe(0);
    expect(await emailCounts(c.id)).toEqual({});
    // An address that is no contact gets the fallbacks; no contact is created.
    const stranger = await env.http().post(`/campaigns/${c.id}/test`).set(auth(project)).send({ email: 'nobody@example.org' });
    expect(stranger.status).toBe(202);
    const msg = await waitUntil(async () => smtp.messages.find((m) => recipientOf(m) === 'nobody@example.org'));
    expect(subjectOf(msg)).toBe('Hello friend');
    expect(
      await queryOne(env.orm.em.fork(), "select 1 from contacts where project_id = ? and email = 'nobody@example.org'", [project.id]),
    ).toBeUndefined();
    smtp.clear();

    // The real send: the two subscribed contacts, not the unsubscribed one.
    const sent = await env.http().post(`/campaigns/${c.id}/send`).set(auth(project)).send({});
    expect(sent.status).toBe(200);
    expect(sent.body.status).toBe('SENDING');
    const done = await waitForStatus(env, project, c.id, 'SENT');
    expect(done.sentAt).not.toBeNull();
    // Sending began (the audience frozen) before the last email went.
    expect(Date.parse(String(done.startedAt))).toBeLessThanOrEqual(Date.parse(done.sentAt!));
    expect(done.totalRecipients).toBe(2);
    expect(mailTo('api').map(recipientOf).sort()).toEqual(['api-1@example.org', 'api-2@example.org']);
    expect(done.stats).toMatchObject({ totalRecipients: 2, sent: 2, opened: 0, openRate: 0 });

    // Engagement as the tracking endpoints record it: one open + click, one bounce, an unsubscribe after the send.
    const em = env.orm.em.fork();
    const rows = await query<{ id: string; contact_id: string }>(em, 'select id, contact_id from emails where campaign_id = ? order by to_email', [c.id]);
    await query(em, 'update emails set delivered_at = now(), opened_at = now(), clicked_at = now() where id = ?', [rows[0]!.id]);
    await query(em, 'update emails set bounced_at = now() where id = ?', [rows[1]!.id]);
    await query(em, 'update contacts set subscribed = false where id = ?', [rows[0]!.contact_id]);
    await query(em, "insert into events (id, project_id, contact_id, name) values (?, ?, ?, 'contact.unsubscribed')", [
      newId('evt'), project.id, rows[0]!.contact_id,
    ]);
    const stats = await env.http().get(`/campaigns/${c.id}/stats`).set(auth(project));
    expect(stats.status).toBe(200);
    expect(stats.body).toEqual({
      totalRecipients: 2, sent: 2, delivered: 1, opened: 1, clicked: 1, bounced: 1, complained: 0, unsubscribed: 1,
      openRate: 0.5, clickRate: 0.5, bounceRate: 0.5,
    });
    expect((await getCampaign(env, project, c.id)).stats).toEqual(stats.body);
    // SENT is final.
    expect((await env.http().post(`/campaigns/${c.id}/cancel`).set(auth(project))).status).toBe(409);
    expect((await env.http().put(`/campaigns/${c.id}`).set(auth(project)).send(c)).status).toBe(409);
  });

  test('GET /campaigns/audience: the recipients a send would count now, by segment and type', async () => {
    const p = await env.project('campaigns audience');
    await seedContacts(p, 'aud', 6, 3); // aud-0 and aud-3 unsubscribed
    const audience = (q: Record<string, string> = {}) => env.http().get('/campaigns/audience').query(q).set(auth(p));
    expect((await audience()).body).toEqual({ segmentId: null, type: 'MARKETING', recipients: 4 });
    // "Everyone" is the subscribed contacts whatever the type.
    expect((await audience({ type: 'TRANSACTIONAL' })).body.recipients).toBe(4);
    const segment = await env
      .http()
      .post('/segments')
      .set(auth(p))
      .send({ name: 'first three', type: 'DYNAMIC', condition: { field: 'data.n', operator: 'lessThan', value: 3 } });
    expect(segment.status).toBe(201);
    expect((await audience({ segmentId: segment.body.id })).body).toEqual({ segmentId: segment.body.id, type: 'MARKETING', recipients: 2 });
    // A transactional campaign to a segment reaches its unsubscribed members too.
    expect((await audience({ segmentId: segment.body.id, type: 'TRANSACTIONAL' })).body.recipients).toBe(3);

    const missing = await audience({ segmentId: 'seg_nope' });
    expect({ status: missing.status, code: missing.body.error.code }).toEqual({ status: 404, code: 'SEGMENT_NOT_FOUND' });
    // Another project's segment is not found.
    const foreign = await env.http().get('/campaigns/audience').query({ segmentId: segment.body.id }).set(auth(project));
    expect(foreign.status).toBe(404);
    const badType = await audience({ type: 'NEWSLETTER' });
    expect({ status: badType.status, fields: badType.body.error.errors.map((e: { field: string }) => e.field) }).toEqual({
      status: 422,
      fields: ['query.type'],
    });
  });
});

test(`a campaign to ${BULK} contacts: every subscribed one exactly once, the unsubscribed none`, async () => {
  const project = await env.project('campaigns bulk');
  await sending.verifiedDomain(project, 'cmp-bulk.test');
  const contacts = await seedContacts(project, 'bulk', BULK, 10); // every 10th unsubscribed
  const subscribed = contacts.filter((c) => c.subscribed);
  const c = await createCampaign(env, project, 'cmp-bulk.test');
  const started = Date.now();
  expect((await env.http().post(`/campaigns/${c.id}/send`).set(auth(project)).send({})).status).toBe(200);
  // Three contacts of the last batch unsubscribe once the audience is frozen: they are skipped too.
  await waitUntil(async () => (await queryOne(env.orm.em.fork(), 'select 1 from campaigns where id = ? and snapshot_at is not null', [c.id])) !== undefined);
  const late = [...subscribed].sort((a, b) => (a.id < b.id ? -1 : 1)).slice(-3);
  await query(env.orm.em.fork(), 'update contacts set subscribed = false where id = any(?)', [late.map((l) => l.id)]);
  const done = await waitForStatus(env, project, c.id, 'SENT', 30_000 + BULK * 10);
  log(`${subscribed.length} emails in ${Date.now() - started} ms`);
  // No batch can send any more, and none of its emails waits for delivery: every copy is at the sink.
  await workflowClosed(env, c.id);
  await deliveriesSettled(env, 'campaign_id = ?', [c.id]);

  const expected = subscribed.filter((s) => !late.includes(s));
  const got = expectNoDuplicates(mailTo('bulk'));
  expect(got.size).toBe(expected.length);
  for (const s of expected) expect(got.has(s.email)).toBe(true);
  expect(done.totalRecipients).toBe(subscribed.length);
  expect(done.stats.sent).toBe(expected.length);
  expect(await emailCounts(c.id)).toEqual({ SENT: expected.length });
  const recipients = await query<{ status: string; n: string }>(
    env.orm.em.fork(),
    'select status, count(*) as n from campaign_recipients where campaign_id = ? group by status order by status',
    [c.id],
  );
  expect(recipients.map((r) => [r.status, Number(r.n)])).toEqual([['SENT', expected.length], ['SKIPPED', 3]]);
  // Rendered per contact, signed, with the one-click unsubscribe headers of marketing mail.
  const one = mailTo('bulk').find((m) => recipientOf(m) === subscribed[1]!.email)!;
  const parsed = await simpleParser(one.raw);
  const n = Number(/bulk-(\d+)@/.exec(subscribed[1]!.email)![1]);
  expect(parsed.subject).toBe(`Hello Name${n}`);
  expect(one.raw.toString('utf8')).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r?$/im);
  expect(one.raw.toString('utf8')).toMatch(/^DKIM-Signature: .*d=cmp-bulk\.test/im);
  // Marketing mail is tracked: the open pixel carries the email's id (the Message-ID's local part).
  expect(parsed.html).toContain('http://localhost:3000/t/o/');
}, 60_000 + BULK * 10);

test('segments: the subscribed members of a segment; a TRANSACTIONAL campaign reaches unsubscribed members too', async () => {
  const project = await env.project('campaigns segments');
  await sending.verifiedDomain(project, 'cmp-seg.test');
  await seedContacts(project, 'segd', 5, 5); // segd-0 unsubscribed
  await seedContacts(project, 'segs', 3, 3); // segs-0 unsubscribed
  await seedContacts(project, 'segx', 2); // in no segment
  const http = () => env.http();
  const dynamic = await http()
    .post('/segments')
    .set(auth(project))
    .send({ name: 'd', type: 'DYNAMIC', condition: { field: 'email', operator: 'contains', value: 'segd-' } });
  expect(dynamic.status).toBe(201);
  const fixed = await http().post('/segments').set(auth(project)).send({ name: 's', type: 'STATIC' });
  expect(fixed.status).toBe(201);
  const added = await http()
    .post(`/segments/${fixed.body.id}/members`)
    .set(auth(project))
    .send({ emails: ['segs-0@example.org', 'segs-1@example.org'] });
  expect(added.status).toBe(200);

  const unknown = await http()
    .post('/campaigns')
    .set(auth(project))
    .send({ name: 'x', subject: 's', body: 'b', from: 'news@cmp-seg.test', segmentId: 'seg_missing' });
  expect(unknown.status).toBe(404);

  const marketing = await createCampaign(env, project, 'cmp-seg.test', { subject: 'Dynamic', segmentId: dynamic.body.id });
  const transactional = await createCampaign(env, project, 'cmp-seg.test', { subject: 'Static', segmentId: fixed.body.id, type: 'TRANSACTIONAL' });
  // The segment is in use while its campaign is scheduled.
  const later = new Date(Date.now() + 3600_000).toISOString();
  expect((await http().post(`/campaigns/${marketing.id}/send`).set(auth(project)).send({ scheduledFor: later })).status).toBe(200);
  expect((await http().delete(`/segments/${dynamic.body.id}`).set(auth(project))).status).toBe(409);
  await http().post(`/campaigns/${marketing.id}/cancel`).set(auth(project));
  await workflowClosed(env, marketing.id);
  const again = await http().post(`/campaigns/${marketing.id}/duplicate`).set(auth(project));
  expect(again.body.segmentId).toBe(dynamic.body.id);

  for (const id of [again.body.id as string, transactional.id]) {
    const res = await http().post(`/campaigns/${id}/send`).set(auth(project)).send({});
    expect(res.status).toBe(200);
  }
  await waitForStatus(env, project, again.body.id, 'SENT');
  await waitForStatus(env, project, transactional.id, 'SENT');
  const bySubject = (subject: string) => smtp.messages.filter((m) => subjectOf(m) === subject).map(recipientOf).sort();
  expect(bySubject('Dynamic')).toEqual(['segd-1@example.org', 'segd-2@example.org', 'segd-3@example.org', 'segd-4@example.org']);
  expect(bySubject('Static')).toEqual(['segs-0@example.org', 'segs-1@example.org']);
  const transactionalMail = smtp.messages.find((m) => subjectOf(m) === 'Static')!;
  expect(transactionalMail.raw.toString('utf8')).not.toMatch(/^List-Unsubscribe/im);
});

test('cancel mid-send stops it: CANCELLED, nothing more arrives; the throttle paces the send', async () => {
  const project = await env.project('campaigns cancel');
  await sending.verifiedDomain(project, 'cmp-cancel.test');
  await seedContacts(project, 'cancel', 300);
  const RATE = 20;
  await setThrottleRate(env.orm.em.fork(), project.id, RATE);
  const c = await createCampaign(env, project, 'cmp-cancel.test');
  expect((await env.http().post(`/campaigns/${c.id}/send`).set(auth(project)).send({})).status).toBe(200);
  await waitUntil(async () => mailTo('cancel').length >= 40, 15_000);

  const cancelled = await env.http().post(`/campaigns/${c.id}/cancel`).set(auth(project));
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.status).toBe('CANCELLED');
  // The workflow closes once the running batch has stopped; then none of its emails waits for
  // delivery (the rows of the rest of the batch are gone), so nothing more can arrive.
  await workflowClosed(env, c.id);
  await deliveriesSettled(env, 'campaign_id = ?', [c.id]);
  const messages = mailTo('cancel');
  expect(messages.length).toBeLessThan(300);
  expectNoDuplicates(messages);
  const after = await getCampaign(env, project, c.id);
  expect(after.status).toBe('CANCELLED');
  // Every email that went is recorded SENT; the rows written for the rest of the batch are gone.
  expect(await emailCounts(c.id)).toEqual({ SENT: messages.length });
  expect(after.stats.sent).toBe(messages.length);

  // Paced at RATE per second (a reservation may run one chunk of RATE/10 ahead).
  const times = messages.map((m) => m.receivedAt.getTime()).sort((a, b) => a - b);
  const seconds = (times[times.length - 1]! - times[0]!) / 1000;
  log(`${messages.length} emails in ${seconds.toFixed(2)} s`);
  expect((messages.length - RATE / 10) / seconds).toBeLessThanOrEqual(RATE * 1.1);
  expect(messages.length / seconds).toBeGreaterThan(RATE * 0.6);
});

test('a scheduled campaign sends at its (moved) time; another is cancelled before its time and sends nothing', async () => {
  const project = await env.project('campaigns scheduled');
  await sending.verifiedDomain(project, 'cmp-sched.test');
  await seedContacts(project, 'sched', 5);
  const a = await createCampaign(env, project, 'cmp-sched.test', { subject: 'Scheduled A' });
  const b = await createCampaign(env, project, 'cmp-sched.test', { subject: 'Scheduled B' });

  // Created a day ago, so the feed's moment of scheduling cannot be mistaken for the creation.
  await query(env.orm.em.fork(), `update campaigns set created_at = now() - interval '1 day' where id in (?, ?)`, [a.id, b.id]);
  const scheduledMoments = async () => {
    const res = await env.http().get('/activity?type=campaign.scheduled').set(auth(project));
    return new Map((res.body.data as { data: { campaignId: string }; createdAt: string }[]).map((i) => [i.data.campaignId, Date.parse(i.createdAt)]));
  };

  const beforeScheduling = Date.now() - 1000; // the database clock may trail ours a little
  const far = new Date(Date.now() + 3600_000).toISOString();
  expect((await env.http().post(`/campaigns/${a.id}/send`).set(auth(project)).send({ scheduledFor: far })).body.status).toBe('SCHEDULED');
  const bAt = new Date(Date.now() + 5000).toISOString();
  expect((await env.http().post(`/campaigns/${b.id}/send`).set(auth(project)).send({ scheduledFor: bAt })).body.status).toBe('SCHEDULED');
  const scheduled = await scheduledMoments();
  expect(scheduled.get(b.id)).toBeGreaterThanOrEqual(beforeScheduling);
  expect(scheduled.get(a.id)).toBeGreaterThanOrEqual(beforeScheduling);
  // A is moved from an hour away to 3 s from now: the waiting workflow takes the new time.
  const aAt = new Date(Date.now() + 3000);
  const moved = await env.http().put(`/campaigns/${a.id}`).set(auth(project)).send({ ...a, scheduledFor: aAt.toISOString() });
  expect(moved.status).toBe(200);
  expect(moved.body.scheduledFor).toBe(aAt.toISOString());
  // Moving it is scheduling it again: the feed places it at the move.
  const afterMove = await scheduledMoments();
  expect(afterMove.get(a.id)).toBeGreaterThan(scheduled.get(a.id)!);
  expect(afterMove.get(b.id)).toBe(scheduled.get(b.id));
  // B is cancelled while it waits: its workflow ends without beginning a send.
  expect((await env.http().post(`/campaigns/${b.id}/cancel`).set(auth(project))).body.status).toBe('CANCELLED');
  await workflowClosed(env, b.id);
  expect((await activitiesOf(b.id)).filter((type) => type !== 'finishCampaign')).toEqual([]);
  expect((await getCampaign(env, project, a.id)).status).toBe('SCHEDULED');
  expect(mailTo('sched')).toHaveLength(0);

  const done = await waitForStatus(env, project, a.id, 'SENT', 20_000);
  const messages = mailTo('sched');
  expect(messages.map(subjectOf).sort()).toEqual(Array(5).fill('Scheduled A'));
  const first = Math.min(...messages.map((m) => m.receivedAt.getTime()));
  expect(first).toBeGreaterThanOrEqual(aAt.getTime() - 50);
  expect(first).toBeLessThan(aAt.getTime() + 5000);
  expect(done.scheduledFor).toBe(aAt.toISOString());

  // Nothing of B went: its closed workflow cannot send at its old time.
  await workflowClosed(env, a.id);
  await deliveriesSettled(env, 'campaign_id = any(?)', [[a.id, b.id]]);
  expect(mailTo('sched').every((m) => subjectOf(m) !== 'Scheduled B')).toBe(true);
  expect(mailTo('sched')).toHaveLength(5);
  expect((await getCampaign(env, project, b.id)).status).toBe('CANCELLED');
});

test("CAMPAIGN_BATCH_SIZE is the batch size of the campaigns started after it is set", async () => {
  expect(loadConfig({}).campaignBatchSize).toBe(5000);
  expect(() => loadConfig({ CAMPAIGN_BATCH_SIZE: '0' })).toThrow(/CAMPAIGN_BATCH_SIZE/);
  const project = await env.project('campaigns batch size');
  await sending.verifiedDomain(project, 'cmp-batch.test');
  await seedContacts(project, 'batch', 100);
  const c = await createCampaign(env, project, 'cmp-batch.test');
  const deployment = new TemporalGateway(env.temporal.client, env.temporal.taskQueue, { ...env.temporal.config, campaignBatchSize: 40 });
  await env.orm.em.fork().transactional(async (tx) => {
    await markCampaignForSending(tx, project.id, c.id, undefined);
    await startCampaign(deployment, { projectId: project.id, campaignId: c.id, scheduledFor: null });
  });
  await waitForStatus(env, project, c.id, 'SENT');
  expect(expectNoDuplicates(mailTo('batch')).size).toBe(100);
  // 40, 40, then 20, which finds the end.
  const history = await env.temporal.client.workflow.getHandle(`campaign:${c.id}`).fetchHistory();
  const batches = (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'sendCampaignBatch');
  expect(batches).toHaveLength(3);
});

test('a long campaign continues as new between batches and still sends each recipient once', async () => {
  const project = await env.project('campaigns continue-as-new');
  await sending.verifiedDomain(project, 'cmp-can.test');
  await seedContacts(project, 'can', 120);
  const c = await createCampaign(env, project, 'cmp-can.test');
  // The route's send with a small batch and a short run: 5 batches of 25, 2 per run → 3 runs.
  await env.orm.em.fork().transactional(async (tx) => {
    await markCampaignForSending(tx, project.id, c.id, undefined);
    await startCampaign(env.temporal, { projectId: project.id, campaignId: c.id, scheduledFor: null }, { batchSize: 25, batchesPerRun: 2 });
  });
  await waitForStatus(env, project, c.id, 'SENT');
  expect(expectNoDuplicates(mailTo('can')).size).toBe(120);
  const runs = await waitUntil(async () => {
    const found: string[] = [];
    for await (const w of env.temporal.client.workflow.list({ query: `WorkflowId = 'campaign:${c.id}'` })) found.push(w.runId);
    return found.length === 3 ? found : undefined;
  });
  expect(new Set(runs).size).toBe(3);
});

test("one recipient's 4xx holds back nobody: the campaign goes on, that email follows through the delivery engine", async () => {
  const project = await env.project('campaigns greylisted');
  await sending.verifiedDomain(project, 'cmp-grey.test');
  await seedContacts(project, 'grey', 60);
  const c = await createCampaign(env, project, 'cmp-grey.test');
  // The first recipient's mail is refused for now, twice: once from the batch, once from the engine.
  smtp.failNext(451, 2);
  expect((await env.http().post(`/campaigns/${c.id}/send`).set(auth(project)).send({})).status).toBe(200);
  await waitForStatus(env, project, c.id, 'SENT');
  await waitUntil(async () => mailTo('grey').length === 60, 30_000);
  // The deferred email is out too, through the engine: every copy of the 60 is at the sink.
  await workflowClosed(env, c.id);
  await deliveriesSettled(env, 'campaign_id = ?', [c.id]);
  expect(expectNoDuplicates(mailTo('grey')).size).toBe(60);
  await waitUntil(async () => (await getCampaign(env, project, c.id)).stats.sent === 60);
  expect(await emailCounts(c.id)).toEqual({ SENT: 60 });
  const recipients = await query<{ status: string; n: string }>(
    env.orm.em.fork(),
    'select status, count(*) as n from campaign_recipients where campaign_id = ? group by status',
    [c.id],
  );
  expect(recipients.map((r) => [r.status, Number(r.n)])).toEqual([['SENT', 60]]);
  // The deferred one was tried more than once and says so.
  const retried = await query<{ attempts: number }>(env.orm.em.fork(), 'select attempts from emails where campaign_id = ? and attempts > 1', [c.id]);
  expect(retried.length).toBeGreaterThanOrEqual(1);
});

describe('a worker killed mid-send', () => {
  const DOMAIN = 'cmp-restart.test';
  const N = 800;
  let env2: TestEnv;
  let child: WorkerProcess | undefined;
  let project: ProjectWithKeys;

  const workerEnv = () => childWorkerEnv(env2.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address });

  beforeAll(async () => {
    // An API of its own whose task queue only the child worker serves.
    env2 = await startTestEnv({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1', SEND_RETRY_MAX_INTERVAL_SECONDS: '1' });
    const spawned = spawnWorkerProcess(workerEnv());
    try {
      project = await env2.project('campaigns restart');
      const res = await env2.http().post('/domains').set(auth(project)).send({ domain: DOMAIN });
      expect(res.status).toBe(201);
      for (const r of (res.body as Domain).records) dns.set(r.name, 'TXT', [r.value]);
      child = await spawned;
      await waitUntil(async () => {
        const list = await env2.http().get(`/domains/project/${project.id}`).set(auth(project));
        return (list.body as Domain[]).some((d) => d.status === 'verified');
      }, 30_000);
    } catch (err) {
      await spawned.then((c) => c.stop()).catch(() => undefined);
      throw err;
    }
  }, 90_000);

  afterAll(async () => {
    smtp.clearFailures();
    await child?.stop();
    await env2?.close();
  });

  test('SIGKILL while sending, a new worker resumes: every recipient exactly once', async () => {
    await seedContacts(project, 'restart', N);
    await setThrottleRate(env.orm.em.fork(), project.id, 400);
    const c = await createCampaign(env2, project, DOMAIN);
    expect((await env2.http().post(`/campaigns/${c.id}/send`).set(auth(project)).send({})).status).toBe(200);
    await waitUntil(async () => mailTo('restart').length >= 250, 20_000);

    // From now on the relay cannot be reached (nothing more is accepted, the batch fails and is
    // retried). Once every accepted message is recorded SENT, the kill lands mid-campaign (the
    // batch activity running or between attempts) without an email in SMTP's own gap between the
    // relay's acceptance and the SENT mark (see temporal/campaigns/activities.ts).
    await smtp.stop();
    const sentRows = async () =>
      Number((await queryOne<{ n: string }>(env.orm.em.fork(), 'select count(*) as n from emails where campaign_id = ? and sent_at is not null', [c.id]))!.n);
    await waitUntil(async () => (await sentRows()) === mailTo('restart').length, 15_000);
    const before = mailTo('restart').length;
    expect(before).toBeLessThan(N);
    expect((await getCampaign(env2, project, c.id)).status).toBe('SENDING');
    await child!.kill();
    log(`killed with ${before} of ${N} sent`);
    await smtp.restart();
    child = await spawnWorkerProcess(workerEnv());

    const done = await waitForStatus(env2, project, c.id, 'SENT', 60_000);
    await workflowClosed(env2, c.id);
    await deliveriesSettled(env2, 'campaign_id = ?', [c.id]);
    const got = expectNoDuplicates(mailTo('restart'));
    expect(got.size).toBe(N);
    expect(done.stats.sent).toBe(N);
    expect(await emailCounts(c.id)).toEqual({ SENT: N });
  }, 90_000);
});
