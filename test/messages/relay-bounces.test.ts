import { randomUUID } from 'node:crypto';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { workflowIds } from '../../temporal/ids';
import { bearer, type TestEnv } from '../helpers/env';
import { type EventItem, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * Bounces without a webhook: the relay's own permanent refusal of a recipient, over the real send
 * paths (the delivery engine, the per-email retry workflow, a campaign batch), is a hard bounce —
 * BOUNCED with the reply, `email.bounced`, the address suppressed, counted by campaign stats and
 * the project's bounce rate — and a suppressed address is never offered to the relay again.
 */

jest.setTimeout(120_000);

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;

const USER_UNKNOWN = '5.1.1 User unknown';

interface EmailDetail {
  id: string;
  status: string;
  to: string;
  attempts: number;
  error: string | null;
  relayResponse: string | null;
  sentAt: string | null;
  bouncedAt: string | null;
  bounceType: string | null;
  contact: { id: string; email: string } | null;
}

beforeAll(async () => {
  // A relay that keeps deferring an email soft-bounces it after 3 s here (3 days by default).
  sending = await startSendingEnv({ SEND_RETRY_FOR_SECONDS: '3' });
  ({ env, smtp } = sending);
});
afterAll(() => sending.close());
beforeEach(() => {
  smtp.clear();
  smtp.clearFailures();
});

/** A fresh project with a verified domain of its own (bounce rates and suppressions are per project). */
async function projectWithDomain(): Promise<{ project: ProjectWithKeys; domain: string }> {
  const project = await env.project();
  const domain = `d${randomUUID().slice(0, 8)}.test`;
  await sending.verifiedDomain(project, domain);
  return { project, domain };
}

async function send(project: ProjectWithKeys, domain: string, to: string): Promise<{ id: string; contactId: string }> {
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to, from: `hello@${domain}`, subject: `For ${to}`, body: '<p>Hello</p>' });
  expect(res.status).toBe(200);
  return { id: res.body.data.emails[0].email as string, contactId: res.body.data.emails[0].contact.id as string };
}

async function getEmail(project: ProjectWithKeys, id: string): Promise<EmailDetail> {
  const res = await env.http().get(`/emails/${id}`).set(bearer(project.secretKey));
  expect(res.status).toBe(200);
  return res.body as EmailDetail;
}

const waitForEmail = (project: ProjectWithKeys, id: string, ok: (e: EmailDetail) => boolean) =>
  waitUntil(async () => {
    const email = await getEmail(project, id);
    return ok(email) && email;
  }, 30_000);

const settled = (e: EmailDetail) => !['QUEUED', 'SENDING'].includes(e.status);

async function eventsOf(project: ProjectWithKeys, contactId: string, name: string): Promise<EventItem[]> {
  const res = await env.http().get(`/events/contact/${contactId}`).set(bearer(project.secretKey));
  expect(res.status).toBe(200);
  return (res.body.data as EventItem[]).filter((e) => e.name === name);
}

const suppression = (project: ProjectWithKeys, email: string) =>
  queryOne<{ reason: string; email_id: string | null }>(env.orm.em.fork(), 'select reason, email_id from suppressions where project_id = ? and email = ?', [
    project.id,
    email,
  ]);

const contactSubscribed = async (project: ProjectWithKeys, contactId: string) => {
  const res = await env.http().get(`/contacts/${contactId}`).set(bearer(project.secretKey));
  expect(res.status).toBe(200);
  return res.body.subscribed as boolean;
};

const security = async (project: ProjectWithKeys) => {
  const res = await env.http().get(`/projects/${project.id}/security`).set(bearer(project.secretKey));
  expect(res.status).toBe(200);
  return res.body as { disabled: boolean; allTime: { sent: number; bounced: number; bounceRate: number } };
};

test('a 550 5.1.1 at RCPT: BOUNCED (hard) with the reply, email.bounced, the address suppressed and counted; the next send never reaches the relay', async () => {
  const { project, domain } = await projectWithDomain();
  smtp.failRecipient('gone@example.org', 550, USER_UNKNOWN);
  const ok = await send(project, domain, 'here@example.org');
  const gone = await send(project, domain, 'gone@example.org');

  const bounced = await waitForEmail(project, gone.id, settled);
  expect(bounced).toMatchObject({ status: 'BOUNCED', bounceType: 'hard', attempts: 1, sentAt: null });
  expect(bounced.relayResponse).toMatch(/^.*550 5\.1\.1 User unknown/);
  expect(bounced.error).toBe(bounced.relayResponse);
  expect(bounced.bouncedAt).not.toBeNull();
  expect(await eventsOf(project, gone.contactId, 'email.bounced')).toEqual([
    expect.objectContaining({ data: { emailId: gone.id, bounceType: 'hard', diagnostic: bounced.relayResponse } }),
  ]);
  expect(await suppression(project, 'gone@example.org')).toEqual({ reason: 'hard_bounce', email_id: gone.id });
  expect(await contactSubscribed(project, gone.contactId)).toBe(false);

  await waitForEmail(project, ok.id, (e) => e.status === 'SENT');
  // Two handed to the relay, one refused: the rate the suspension rule reads.
  expect((await security(project)).allTime).toMatchObject({ sent: 2, bounced: 1, bounceRate: 0.5 });

  // The relay would take it now: only the suppression keeps it from going.
  smtp.clearFailures();
  const again = await send(project, domain, 'gone@example.org');
  expect(await waitForEmail(project, again.id, settled)).toMatchObject({ status: 'FAILED', error: 'suppressed', attempts: 0, bounceType: null });
  await send(project, domain, 'after@example.org').then((e) => waitForEmail(project, e.id, (x) => x.status === 'SENT'));
  expect(smtp.messages.flatMap((m) => m.envelope.to)).not.toContain('gone@example.org');
});

test('another 5xx (to MAIL FROM) is no bounce: FAILED with the reply, the address stays mailable', async () => {
  const { project, domain } = await projectWithDomain();
  smtp.failNext(550, 1, { stage: 'mail', message: '5.7.1 Sender not allowed' });
  const refused = await send(project, domain, 'kept@example.org');
  const failed = await waitForEmail(project, refused.id, settled);
  expect(failed).toMatchObject({ status: 'FAILED', bounceType: null, bouncedAt: null, attempts: 1 });
  expect(failed.relayResponse).toMatch(/550 5\.7\.1 Sender not allowed/);
  expect(await suppression(project, 'kept@example.org')).toBeUndefined();
  expect(await eventsOf(project, refused.contactId, 'email.bounced')).toEqual([]);

  const next = await send(project, domain, 'kept@example.org');
  await waitForEmail(project, next.id, (e) => e.status === 'SENT');
});

test('refused after a deferral: the retry workflow records the hard bounce and ends', async () => {
  const { project, domain } = await projectWithDomain();
  // The first attempt is deferred at RCPT (the engine hands it to its retry workflow), the second refused for good.
  smtp.failNext(451, 1, { stage: 'rcpt', message: '4.2.0 Try later' });
  smtp.failNext(550, 1, { stage: 'rcpt', message: USER_UNKNOWN });
  const { id, contactId } = await send(project, domain, 'later-gone@example.org');

  const bounced = await waitForEmail(project, id, settled);
  expect(bounced).toMatchObject({ status: 'BOUNCED', bounceType: 'hard', attempts: 2 });
  expect(bounced.relayResponse).toMatch(/550 5\.1\.1 User unknown/);
  expect(await suppression(project, 'later-gone@example.org')).toEqual({ reason: 'hard_bounce', email_id: id });
  expect(await eventsOf(project, contactId, 'email.bounced')).toHaveLength(1);
  // It went through the retry workflow, which ends there: a 5xx is not retried.
  const retry = env.temporal.client.workflow.getHandle(workflowIds.sendEmails(id));
  const described = await waitUntil(async () => {
    const d = await retry.describe().catch(() => undefined);
    return d && d.status.name !== 'RUNNING' && d;
  });
  expect(described.status.name).toBe('FAILED');
});

test('deferred (4xx) until the retries run out: BOUNCED (soft) with the last reply, email.bounced, the address still mailable', async () => {
  const { project, domain } = await projectWithDomain();
  smtp.failNext(452, 1000, { stage: 'rcpt', message: '4.2.2 Mailbox full' });
  const { id, contactId } = await send(project, domain, 'full@example.org');

  const bounced = await waitForEmail(project, id, settled);
  expect(bounced).toMatchObject({ status: 'BOUNCED', bounceType: 'soft' });
  expect(bounced.attempts).toBeGreaterThan(1);
  expect(bounced.relayResponse).toMatch(/452 4\.2\.2 Mailbox full/);
  const events = await eventsOf(project, contactId, 'email.bounced');
  expect(events.map((e) => e.data)).toEqual([expect.objectContaining({ emailId: id, bounceType: 'soft' })]);
  // A full mailbox may empty: no suppression, no unsubscribe, the next send goes out.
  expect(await suppression(project, 'full@example.org')).toBeUndefined();
  expect(await eventsOf(project, contactId, 'contact.unsubscribed')).toEqual([]);
  smtp.clearFailures();
  const next = await send(project, domain, 'full@example.org');
  expect(await waitForEmail(project, next.id, settled)).toMatchObject({ status: 'SENT' });
});

test('a campaign: the refused recipient bounces, its stats and the bounce rate count it, and the next campaign skips it', async () => {
  const { project, domain } = await projectWithDomain();
  const auth = bearer(project.secretKey);
  const addresses = ['c-one@example.org', 'c-two@example.org', 'c-gone@example.org'];
  for (const email of addresses) expect((await env.http().post('/contacts').set(auth).send({ email })).status).toBe(201);
  // Transactional to a segment: its unsubscribed members too, so only the suppression can keep one out.
  const segment = await env
    .http()
    .post('/segments')
    .set(auth)
    .send({ name: 'c', type: 'DYNAMIC', condition: { field: 'email', operator: 'contains', value: 'c-' } });
  expect(segment.status).toBe(201);
  smtp.failRecipient('c-gone@example.org', 550, USER_UNKNOWN);

  const campaign = async (name: string) => {
    const created = await env
      .http()
      .post('/campaigns')
      .set(auth)
      .send({ name, subject: 'News', body: '<p>News</p>', from: `news@${domain}`, type: 'TRANSACTIONAL', segmentId: segment.body.id });
    expect(created.status).toBe(201);
    expect((await env.http().post(`/campaigns/${created.body.id}/send`).set(auth).send({})).status).toBe(200);
    return waitUntil(async () => {
      const res = await env.http().get(`/campaigns/${created.body.id}`).set(auth);
      return res.body.status === 'SENT' && (res.body as { id: string; stats: Record<string, number> });
    }, 30_000);
  };

  const first = await campaign('First');
  expect(first.stats).toMatchObject({ totalRecipients: 3, sent: 3, bounced: 1, bounceRate: 0.3333 });
  const rows = await query<{ to_email: string; status: string; bounce_type: string | null; smtp_response: string | null; attempts: number; recipient: string }>(
    env.orm.em.fork(),
    `select e.to_email, e.status, e.bounce_type, e.smtp_response, e.attempts, r.status as recipient
     from emails e join campaign_recipients r on r.campaign_id = e.campaign_id and r.contact_id = e.contact_id
     where e.campaign_id = ? order by e.to_email`,
    [first.id],
  );
  expect(rows).toEqual([
    expect.objectContaining({ to_email: 'c-gone@example.org', status: 'BOUNCED', bounce_type: 'hard', attempts: 1, recipient: 'FAILED' }),
    expect.objectContaining({ to_email: 'c-one@example.org', status: 'SENT', recipient: 'SENT' }),
    expect.objectContaining({ to_email: 'c-two@example.org', status: 'SENT', recipient: 'SENT' }),
  ]);
  expect(rows[0]!.smtp_response).toMatch(/550 5\.1\.1 User unknown/);
  expect(await suppression(project, 'c-gone@example.org')).toMatchObject({ reason: 'hard_bounce' });
  expect((await security(project)).allTime).toMatchObject({ sent: 3, bounced: 1 });

  // The relay would take it now: the suppression alone keeps the next campaign from offering it.
  smtp.clearFailures();
  smtp.clear();
  const second = await campaign('Second');
  expect(second.stats).toMatchObject({ sent: 2, bounced: 0 });
  expect(smtp.messages.flatMap((m) => m.envelope.to).sort()).toEqual(['c-one@example.org', 'c-two@example.org']);
  const skipped = await queryOne<{ status: string }>(
    env.orm.em.fork(),
    `select r.status from campaign_recipients r join contacts c on c.id = r.contact_id where r.campaign_id = ? and c.email = ?`,
    [second.id, 'c-gone@example.org'],
  );
  expect(skipped).toEqual({ status: 'SKIPPED' });
});

test("the relay's refusals drive the bounce-rate rule: over 10% of 100 sent disables the project", async () => {
  const { project, domain } = await projectWithDomain();
  // 100 emails the relay took, written directly (the send path has its own tests).
  await query(
    env.orm.em.fork(),
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, sent_at)
     select gen_random_uuid(), ?, 'transactional', 'ok-' || n || '@example.com', 'me@x.test', 's', 'b', 'SENT', now()
     from generate_series(1, 100) n`,
    [project.id],
  );
  smtp.failRecipient(/^nobody-\d+@example\.org$/, 550, USER_UNKNOWN);
  const to = Array.from({ length: 12 }, (_, n) => `nobody-${n}@example.org`);
  const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `hello@${domain}`, subject: 'S', body: 'B' });
  expect(res.status).toBe(200);

  // 12 of 112 is 10.7%, crossed by whichever of the bounces, recorded side by side, commits last.
  const figures = await waitUntil(async () => {
    const s = await security(project);
    return s.disabled && s;
  }, 30_000);
  expect(figures.allTime).toMatchObject({ sent: 112, bounced: 12 });
  const suspension = await queryOne<{ details: { rule: string } }>(env.orm.em.fork(), 'select details from project_suspensions where project_id = ?', [project.id]);
  expect(suspension!.details.rule).toBe('bounce_rate');
});
