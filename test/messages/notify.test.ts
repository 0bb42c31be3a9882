import { randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import request from 'supertest';
import { createApp } from '../../api/app';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { bearer, type TestEnv } from '../helpers/env';
import { type EventItem, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;
let newsletter: string;

const DOMAIN = 'acme-notify.test';
const SECRET = 'notify-secret-for-the-tests-0123456789';
const auth = { Authorization: `Bearer ${SECRET}` };

interface EmailRow {
  status: string;
  error: string | null;
  delivered_at: string | null;
  bounced_at: string | null;
  bounce_type: string | null;
  complained_at: string | null;
}

const emailRow = async (id: string) =>
  (await queryOne<EmailRow>(
    env.orm.em.fork(),
    `select status, error, to_char(delivered_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as delivered_at,
       bounced_at::text, bounce_type, complained_at::text from emails where id = ?`,
    [id],
  ))!;

const suppression = async (email: string) =>
  (await queryOne<{ reason: string; email_id: string }>(
    env.orm.em.fork(),
    'select reason, email_id from suppressions where project_id = ? and email = ?',
    [project.id, email],
  )) ?? null;

const isSubscribed = async (contactId: string) =>
  (await env.http().get(`/contacts/${contactId}`).set(bearer(project.secretKey))).body.subscribed as boolean;

const events = async (contactId: string) =>
  ((await env.http().get(`/events/contact/${contactId}`).set(bearer(project.secretKey))).body.data as EventItem[])
    .filter((e) => e.name !== 'email.sent')
    .map((e) => ({ name: e.name, data: e.data }))
    .reverse();

const received = (to: string) => smtp.messages.filter((m) => m.envelope.to.includes(to));

/** A newsletter to `to` through /v1/send, delivered to the sink; its ids and Message-ID. */
async function sent(to: string) {
  const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, template: newsletter, subscribed: true });
  expect(res.status).toBe(200);
  const emailId = res.body.data.emails[0].email as string;
  const before = received(to).length;
  const message = await waitUntil(async () => received(to).length > before && received(to)[before]);
  const messageId = (await simpleParser(message.raw)).messageId!;
  expect(messageId).toBe(`<${emailId}@${DOMAIN}>`);
  await waitUntil(async () => (await emailRow(emailId)).status === 'SENT');
  return { emailId, contactId: res.body.data.emails[0].contact.id as string, messageId };
}

const notify = (body: unknown) => env.http().post('/webhooks/notify').set(auth).send(body as object);

/** What SES puts in `mail`: its own messageId, and ours in the headers. */
const sesMail = (to: string, messageId: string, where: 'commonHeaders' | 'headers' = 'commonHeaders') => ({
  timestamp: new Date().toISOString(),
  source: `news@${DOMAIN}`,
  sourceArn: `arn:aws:ses:us-east-1:123456789012:identity/${DOMAIN}`,
  sendingAccountId: '123456789012',
  messageId: '0100018c2f5e1a2b-3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f-000000',
  destination: [to],
  headersTruncated: false,
  headers: [
    { name: 'From', value: `news@${DOMAIN}` },
    { name: 'To', value: to },
    ...(where === 'headers' ? [{ name: 'Message-ID', value: messageId }] : []),
  ],
  commonHeaders: { from: [`news@${DOMAIN}`], to: [to], subject: 'News', ...(where === 'commonHeaders' ? { messageId } : {}) },
});

/** An SNS HTTP(S) delivery: the envelope, posted as text/plain, as SNS does. */
const sns = (message: unknown, type = 'Notification') =>
  env
    .http()
    .post('/webhooks/notify')
    .set(auth)
    .set('Content-Type', 'text/plain; charset=UTF-8')
    .set('x-amz-sns-message-type', type)
    .send(
      JSON.stringify({
        Type: type,
        MessageId: randomUUID(),
        TopicArn: 'arn:aws:sns:us-east-1:123456789012:ses-feedback',
        Message: typeof message === 'string' ? message : JSON.stringify(message),
        Timestamp: new Date().toISOString(),
        SignatureVersion: '1',
        Signature: 'c2lnbmF0dXJl',
        SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem',
        ...(type === 'SubscriptionConfirmation'
          ? { Token: 'tok', SubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=tok' }
          : { UnsubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe' }),
      }),
    );

beforeAll(async () => {
  sending = await startSendingEnv({ NOTIFY_SECRET: SECRET });
  ({ env, smtp } = sending);
  project = await env.project('notify project');
  await sending.verifiedDomain(project, DOMAIN);
  const t = await env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({ name: 'News', subject: 'News', body: '<p>News</p><a href="https://example.com/a">A</a>', from: `news@${DOMAIN}`, type: 'MARKETING' });
  expect(t.status).toBe(201);
  newsletter = t.body.id;
});

afterAll(() => sending.close());

test('the shared secret: missing or wrong → 401; Bearer or Basic (SNS URL credentials) accepted; unset → 404', async () => {
  const body = { type: 'delivered', emailId: randomUUID() };
  const none = await env.http().post('/webhooks/notify').send(body);
  expect(none.status).toBe(401);
  expect(none.body.error.code).toBe('MISSING_AUTH');
  expect(none.headers['www-authenticate']).toBe('Basic realm="tidings-notify"');
  const wrong = await env.http().post('/webhooks/notify').set('Authorization', `Bearer ${SECRET}x`).send(body);
  expect(wrong.status).toBe(401);
  expect(wrong.body.error.code).toBe('INVALID_CREDENTIALS');
  const apiKey = await env.http().post('/webhooks/notify').set(bearer(project.secretKey)).send(body);
  expect(apiKey.status).toBe(401);
  const basicWrong = await env.http().post('/webhooks/notify').auth('tidings', 'nope').send(body);
  expect(basicWrong.status).toBe(401);

  // Authenticated, about no email of ours: accepted, ignored.
  const ok = await notify(body);
  expect(ok.status).toBe(202);
  expect(ok.body).toEqual({ processed: 0, ignored: 1 });
  const basic = await env.http().post('/webhooks/notify').auth('tidings', SECRET).send(body);
  expect(basic.status).toBe(202);

  // Without NOTIFY_SECRET the endpoint is off.
  const { app } = createApp({ ...env.deps, config: { ...env.deps.config, notifySecret: undefined } });
  const off = await request(app).post('/webhooks/notify').set(auth).send(body);
  expect(off.status).toBe(404);
  expect(off.body.error.code).toBe('FEATURE_DISABLED');
});

test('our JSON: delivered by emailId or Message-ID, one or many; the status only moves forward', async () => {
  const a = await sent('delivered-a@example.org');
  const b = await sent('delivered-b@example.org');

  const one = await notify({ type: 'delivered', emailId: a.emailId, timestamp: '2026-01-02T03:04:05Z' });
  expect(one.status).toBe(200);
  expect(one.body).toEqual({ processed: 1, ignored: 0 });
  expect(await emailRow(a.emailId)).toMatchObject({ status: 'DELIVERED', delivered_at: '2026-01-02T03:04:05Z' });

  // An array: one by Message-ID, one about nobody, one repeat (idempotent: no second event).
  const many = await notify([
    { type: 'delivered', messageId: b.messageId },
    { type: 'delivered', messageId: `<${randomUUID()}@${DOMAIN}>` },
    { type: 'delivered', emailId: a.emailId },
  ]);
  expect(many.status).toBe(202);
  expect(many.body).toEqual({ processed: 2, ignored: 1 });
  expect((await emailRow(b.emailId)).status).toBe('DELIVERED');
  expect(await events(a.contactId)).toEqual([{ name: 'email.delivered', data: { emailId: a.emailId } }]);

  // Opened (through the pixel) then a late delivery notification: still OPENED, delivered_at set.
  const c = await sent('delivered-c@example.org');
  const html = String((await simpleParser(received('delivered-c@example.org')[0]!.raw)).html);
  const pixel = /<img src="http:\/\/localhost:3000(\/t\/o\/[^"]+)"/.exec(html)![1]!;
  await env.http().get(pixel).expect(200);
  expect((await notify({ type: 'delivered', emailId: c.emailId })).status).toBe(200);
  const row = await emailRow(c.emailId);
  expect(row.status).toBe('OPENED');
  expect(row.delivered_at).not.toBeNull();
});

test('a hard bounce unsubscribes the contact, suppresses the address, and the next send is not delivered', async () => {
  const to = 'gone@example.org';
  const first = await sent(to);
  expect(await isSubscribed(first.contactId)).toBe(true);

  // Matched by recipient only: the latest email sent to the address.
  const res = await notify({ type: 'bounced', recipient: 'Gone@Example.org', bounceType: 'hard', diagnostic: 'smtp; 550 5.1.1 user unknown' });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ processed: 1, ignored: 0 });
  expect(await emailRow(first.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await isSubscribed(first.contactId)).toBe(false);
  expect(await suppression(to)).toEqual({ reason: 'hard_bounce', email_id: first.emailId });
  // A repeat changes nothing and emits nothing.
  expect((await notify({ type: 'bounced', emailId: first.emailId })).status).toBe(200);
  expect(await events(first.contactId)).toEqual([
    { name: 'email.bounced', data: { emailId: first.emailId, bounceType: 'hard', diagnostic: 'smtp; 550 5.1.1 user unknown' } },
    { name: 'contact.unsubscribed', data: {} },
  ]);

  // Suppressed: transactional mail too (subscribing again does not lift it) is recorded FAILED, never sent.
  const again = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to, from: `billing@${DOMAIN}`, subject: 'Receipt', body: 'Thanks', subscribed: true });
  expect(again.status).toBe(200);
  const againId = again.body.data.emails[0].email as string;
  await waitUntil(async () => (await emailRow(againId)).status === 'FAILED');
  expect((await emailRow(againId)).error).toBe('suppressed');
  // FAILED is final: the engine never offers the email to the relay after it.
  expect(received(to)).toHaveLength(1);
});

test('SES via SNS (text/plain): soft bounce, delivery, complaint, hard bounce; subscription confirmation', async () => {
  // Soft (Transient): the email and its event, nothing else.
  const soft = await sent('full-mailbox@example.org');
  const softRes = await sns({
    notificationType: 'Bounce',
    bounce: {
      bounceType: 'Transient',
      bounceSubType: 'MailboxFull',
      bouncedRecipients: [{ emailAddress: 'full-mailbox@example.org', status: '4.2.2', diagnosticCode: 'smtp; 452 4.2.2 mailbox full' }],
      timestamp: new Date().toISOString(),
      feedbackId: 'fb-1',
    },
    mail: sesMail('full-mailbox@example.org', soft.messageId, 'headers'),
  });
  expect(softRes.status).toBe(200);
  expect(softRes.body).toEqual({ processed: 1, ignored: 0 });
  expect(await emailRow(soft.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'soft' });
  expect(await isSubscribed(soft.contactId)).toBe(true);
  expect(await suppression('full-mailbox@example.org')).toBeNull();
  expect(await events(soft.contactId)).toEqual([
    { name: 'email.bounced', data: { emailId: soft.emailId, bounceType: 'soft', diagnostic: 'smtp; 452 4.2.2 mailbox full' } },
  ]);
  // A later delivery supersedes a soft bounce.
  const delivered = await sns({
    notificationType: 'Delivery',
    mail: sesMail('full-mailbox@example.org', soft.messageId),
    delivery: { timestamp: new Date().toISOString(), recipients: ['full-mailbox@example.org'], smtpResponse: '250 ok' },
  });
  expect(delivered.body).toEqual({ processed: 1, ignored: 0 });
  expect((await emailRow(soft.emailId)).status).toBe('DELIVERED');

  // Complaint: unsubscribed and suppressed.
  const complainer = await sent('angry@example.org');
  const complaint = await sns({
    notificationType: 'Complaint',
    complaint: { complainedRecipients: [{ emailAddress: 'angry@example.org' }], timestamp: new Date().toISOString(), complaintFeedbackType: 'abuse' },
    mail: sesMail('angry@example.org', complainer.messageId),
  });
  expect(complaint.status).toBe(200);
  expect((await emailRow(complainer.emailId)).status).toBe('COMPLAINED');
  expect(await isSubscribed(complainer.contactId)).toBe(false);
  expect(await suppression('angry@example.org')).toEqual({ reason: 'complaint', email_id: complainer.emailId });
  expect(await events(complainer.contactId)).toEqual([
    { name: 'email.complained', data: { emailId: complainer.emailId } },
    { name: 'contact.unsubscribed', data: {} },
  ]);

  // Hard (Permanent) via SNS: suppressed, and a newsletter sent afterwards never leaves.
  const hard = await sent('nobody@example.org');
  const hardRes = await sns({
    notificationType: 'Bounce',
    bounce: { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: 'nobody@example.org' }] },
    mail: sesMail('nobody@example.org', hard.messageId),
  });
  expect(hardRes.body).toEqual({ processed: 1, ignored: 0 });
  expect(await emailRow(hard.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await isSubscribed(hard.contactId)).toBe(false);
  expect((await suppression('nobody@example.org'))?.reason).toBe('hard_bounce');
  const next = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to: 'nobody@example.org', template: newsletter });
  const nextId = next.body.data.emails[0].email as string;
  await waitUntil(async () => (await emailRow(nextId)).status === 'FAILED');
  expect(received('nobody@example.org')).toHaveLength(1);

  // Raw message delivery (no envelope), an event type we do not track: accepted, ignored.
  const open = await notify({ eventType: 'Open', mail: sesMail('nobody@example.org', hard.messageId), open: { timestamp: new Date().toISOString() } });
  expect(open.status).toBe(202);
  expect(open.body).toEqual({ processed: 0, ignored: 1 });
  // SES's own test message when the topic is set up.
  expect((await sns({ notificationType: 'AmazonSnsSubscriptionSucceeded', message: 'ok' })).body).toEqual({ processed: 0, ignored: 1 });

  // Subscription confirmation: logged for the operator (no outgoing call), 200.
  const confirm = await sns('You have chosen to subscribe to the topic', 'SubscriptionConfirmation');
  expect(confirm.status).toBe(200);
  expect(confirm.body).toEqual({ processed: 0, ignored: 0 });
});

test('malformed notifications are a 422 naming what is wrong, and change nothing', async () => {
  // This file's project only: other test files record email events in the same database meanwhile.
  const engagement = () =>
    query(env.orm.em.fork(), "select id from events where project_id = ? and name like 'email.%' and name <> 'email.sent'", [project.id]);
  const before = await engagement();
  const cases: [unknown, RegExp][] = [
    [{ type: 'opened', emailId: randomUUID() }, /type/],
    [{ type: 'bounced' }, /emailId, messageId or recipient/],
    [{ type: 'delivered', emailId: randomUUID(), bounceType: 'hard' }, /bounceType/],
    [[], /(body)|array|too small|>=1/i],
    [{ Type: 'Notification', Message: 'not json' }, /Message/],
    [{ Type: 'Notification', Message: JSON.stringify({ bounce: {} }) }, /Message/],
    [{ hello: 'world' }, /type/],
  ];
  for (const [body, message] of cases) {
    const res = await notify(body);
    expect({ body, status: res.status, code: res.body.error?.code }).toEqual({ body, status: 422, code: 'VALIDATION_ERROR' });
    expect(res.body.error.message).toMatch(message);
  }
  const malformed = await env.http().post('/webhooks/notify').set(auth).set('Content-Type', 'text/plain').send('{"type":');
  expect(malformed.status).toBe(400);
  expect(await engagement()).toHaveLength(before.length);
});
