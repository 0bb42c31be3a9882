import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { inboundHandler } from '../../api/use-cases/inbound';
import { loadBounceAddresses } from '../../db/domains/return-paths';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import type { BounceAddresses } from '../../mail/inbound/bounce-address';
import { type Receiver, startReceiver } from '../../mail/inbound/receiver';
import { bearer, type TestEnv } from '../helpers/env';
import { type Domain, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';

/**
 * The inbound SMTP receiver, as cli/start.ts runs it next to the API, against the real database:
 * DSNs and ARF reports shaped like those Postfix, Exim, Gmail and a feedback loop send, and a
 * reply, delivered over SMTP; forged and foreign addresses refused at RCPT.
 */

let sending: SendingEnv;
let env: TestEnv;
let project: ProjectWithKeys;
let receiver: Receiver;
let bounces: BounceAddresses;
let domain: Domain;
const dataDir = mkdtempSync(path.join(tmpdir(), 'tidings-inbound-'));
const DOMAIN = `inbound-${randomUUID().slice(0, 8)}.test`;
const MAX_BYTES = 64 * 1024;

beforeAll(async () => {
  sending = await startSendingEnv({ DATA_DIR: dataDir });
  env = sending.env;
  project = await env.project('inbound project');
  domain = await sending.verifiedDomain(project, DOMAIN);
  bounces = await loadBounceAddresses(env.orm, env.deps.config);
  receiver = await startReceiver(
    { port: 0, host: '127.0.0.1', name: 'mx.inbound.test', maxMessageBytes: MAX_BYTES },
    inboundHandler({ orm: env.orm, storage: env.deps.storage, bounces, logger: env.deps.logger }),
  );
});

afterAll(async () => {
  await receiver?.close();
  await sending?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** One SMTP transaction to the receiver; rejects with nodemailer's error (responseCode, and `rejectedErrors` for RCPT). */
async function deliver(to: string[], raw: string, from = ''): Promise<void> {
  const conn = new SMTPConnection({ host: '127.0.0.1', port: receiver.port, ignoreTLS: true });
  await new Promise<void>((resolve, reject) => {
    conn.once('error', reject);
    conn.connect(() => resolve());
  });
  try {
    await new Promise((resolve, reject) => conn.send({ from, to }, raw, (err, info) => (err ? reject(err) : resolve(info))));
  } finally {
    conn.quit();
  }
}

const refusal = async (to: string[], raw: string) => (await deliver(to, raw).then(() => undefined, (e: unknown) => e)) as
  | { responseCode?: number; code?: string; rejectedErrors?: { responseCode?: number }[] }
  | undefined;

/** An email through /v1/send, delivered to the SMTP sink: its ids, Message-ID and what the relay got. */
async function sent(to: string) {
  const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `hello@${DOMAIN}`, subject: 'News', body: '<p>News</p>' });
  expect(res.status).toBe(200);
  const emailId = res.body.data.emails[0].email as string;
  const relayed = await waitUntil(async () => sending.smtp.messages.find((m) => m.envelope.to.includes(to)));
  await waitUntil(async () => (await emailRow(emailId)).status === 'SENT');
  return { emailId, contactId: res.body.data.emails[0].contact.id as string, messageId: `<${emailId}@${DOMAIN}>`, relayed };
}

const emailRow = async (id: string) =>
  (await queryOne<{ status: string; bounce_type: string | null; complained_at: Date | null }>(
    env.orm.em.fork(),
    'select status, bounce_type, complained_at from emails where id = ?',
    [id],
  ))!;

const suppressed = async (email: string) =>
  (await queryOne<{ reason: string }>(env.orm.em.fork(), 'select reason from suppressions where project_id = ? and email = ?', [project.id, email]))?.reason;

const eventsNamed = (name: string) =>
  query<{ contact_id: string; data: Record<string, unknown> }>(env.orm.em.fork(), 'select contact_id, data from events where project_id = ? and name = ? order by id', [
    project.id,
    name,
  ]);

const eventCount = async () => Number((await queryOne<{ n: string }>(env.orm.em.fork(), 'select count(*) as n from events where project_id = ?', [project.id]))!.n);

const originalHeaders = (to: string, messageId: string) =>
  [`From: hello@${DOMAIN}`, `To: ${to}`, 'Subject: News', `Message-ID: ${messageId}`, 'MIME-Version: 1.0', 'Content-Type: text/html; charset=utf-8'].join('\r\n');

/** A Postfix bounce: notification, delivery report, undelivered message headers. */
function postfixDsn(to: string, bounceAddress: string, messageId: string, action: string, status: string, diagnostic: string): string {
  const b = '8C1A2B3D4E.1764547200/mx.example.net';
  return [
    'From: MAILER-DAEMON@mx.example.net (Mail Delivery System)',
    'Subject: Undelivered Mail Returned to Sender',
    `To: ${bounceAddress}`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary="${b}"`,
    'Content-Transfer-Encoding: 7bit',
    'Message-Id: <20261201000000.8C1A2B3D4E@mx.example.net>',
    '',
    'This is a MIME-encapsulated message.',
    '',
    `--${b}`,
    'Content-Description: Notification',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mail system at host mx.example.net.',
    '',
    "I'm sorry to have to inform you that your message could not",
    'be delivered to one or more recipients.',
    '',
    `<${to}>: host mail.example.net[192.0.2.25] said: ${diagnostic}`,
    '',
    `--${b}`,
    'Content-Description: Delivery report',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    'X-Postfix-Queue-ID: 8C1A2B3D4E',
    `X-Postfix-Sender: rfc822; ${bounceAddress}`,
    'Arrival-Date: Mon,  1 Dec 2026 00:00:00 +0000 (UTC)',
    '',
    `Final-Recipient: rfc822; ${to}`,
    `Original-Recipient: rfc822;${to}`,
    `Action: ${action}`,
    `Status: ${status}`,
    'Remote-MTA: dns; mail.example.net',
    `Diagnostic-Code: smtp; ${diagnostic}`,
    '',
    `--${b}`,
    'Content-Description: Undelivered Message Headers',
    'Content-Type: text/rfc822-headers',
    '',
    originalHeaders(to, messageId),
    '',
    `--${b}--`,
    '',
  ].join('\r\n');
}

test('a Postfix DSN (failed, 5.1.1) to the bounce address: the email BOUNCED hard, email.bounced, the address suppressed', async () => {
  const to = 'ada-postfix@example.net';
  const email = await sent(to);
  const diagnostic = `550 5.1.1 <${to}>: Recipient address rejected: User unknown in virtual mailbox table`;
  await deliver([bounces.addressFor(email.emailId, DOMAIN)], postfixDsn(to, bounces.addressFor(email.emailId, DOMAIN), email.messageId, 'failed', '5.1.1', diagnostic));
  expect(await emailRow(email.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await suppressed(to)).toBe('hard_bounce');
  const bounced = (await eventsNamed('email.bounced')).filter((e) => e.data.emailId === email.emailId);
  expect(bounced).toEqual([{ contact_id: email.contactId, data: { emailId: email.emailId, bounceType: 'hard', diagnostic: `smtp; ${diagnostic}` } }]);
});

test('Exim bounces, as a DSN and as the older plain text with X-Failed-Recipients: both hard', async () => {
  const [one, two] = [await sent('bob-exim@example.org'), await sent('bob-exim-plain@example.org')];
  const b = '1764547200-eximdsn-1804289383';
  const dsn = [
    'From: Mail Delivery System <Mailer-Daemon@mx.exim.example>',
    `To: ${bounces.addressFor(one.emailId, DOMAIN)}`,
    'X-Failed-Recipients: bob-exim@example.org',
    'Auto-Submitted: auto-replied',
    'Subject: Mail delivery failed: returning message to sender',
    `Content-Type: multipart/report; report-type=delivery-status; boundary=${b}`,
    'MIME-Version: 1.0',
    'Message-Id: <E1vQxYz-000123-AB@mx.exim.example>',
    '',
    `--${b}`,
    'Content-type: text/plain; charset=us-ascii',
    '',
    'This message was created automatically by mail delivery software.',
    '',
    'A message that you sent could not be delivered to one or more of its',
    'recipients. This is a permanent error. The following address(es) failed:',
    '',
    '  bob-exim@example.org',
    '    host mail.example.org [192.0.2.30]',
    '    SMTP error from remote mail server after RCPT TO:<bob-exim@example.org>:',
    '    550 Unrouteable address',
    '',
    `--${b}`,
    'Content-type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.exim.example',
    '',
    'Action: failed',
    'Final-Recipient: rfc822;bob-exim@example.org',
    'Status: 5.0.0',
    'Remote-MTA: dns; mail.example.org',
    'Diagnostic-Code: smtp; 550 Unrouteable address',
    '',
    `--${b}`,
    'Content-type: message/rfc822',
    '',
    originalHeaders('bob-exim@example.org', one.messageId),
    '',
    '<p>News</p>',
    '',
    `--${b}--`,
    '',
  ].join('\r\n');
  const plain = [
    'From: Mail Delivery System <Mailer-Daemon@old-exim.example>',
    `To: ${bounces.addressFor(two.emailId, DOMAIN)}`,
    'X-Failed-Recipients: bob-exim-plain@example.org',
    'Auto-Submitted: auto-replied',
    'Subject: Mail delivery failed: returning message to sender',
    '',
    'This message was created automatically by mail delivery software.',
    '',
    'A message that you sent could not be delivered to one or more of its',
    'recipients. This is a permanent error. The following address(es) failed:',
    '',
    '  bob-exim-plain@example.org',
    '    Mailbox does not exist',
    '',
  ].join('\r\n');
  await deliver([bounces.addressFor(one.emailId, DOMAIN)], dsn);
  await deliver([bounces.addressFor(two.emailId, DOMAIN)], plain);
  expect(await emailRow(one.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await emailRow(two.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await suppressed('bob-exim@example.org')).toBe('hard_bounce');
  expect(await suppressed('bob-exim-plain@example.org')).toBe('hard_bounce');
});

test('a Gmail DSN (nested related/alternative parts, folded diagnostic) maps to its email as a hard bounce', async () => {
  const to = 'carol-gmail@example.com';
  const email = await sent(to);
  const [outer, related, alt] = ['000000000000f1e2d3c4b5a69788', '000000000000f1e2d3c4b5a69789', '000000000000f1e2d3c4b5a69790'];
  const dsn = [
    'From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>',
    `To: ${bounces.addressFor(email.emailId, DOMAIN)}`,
    'Auto-Submitted: auto-replied',
    'Subject: Delivery Status Notification (Failure)',
    `References: ${email.messageId}`,
    `In-Reply-To: ${email.messageId}`,
    `X-Failed-Recipients: ${to}`,
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; boundary="${outer}"; report-type=delivery-status`,
    'Message-ID: <6940a3e1.050a0220.1f2e3d.0001.GMR@mx.google.com>',
    '',
    `--${outer}`,
    `Content-Type: multipart/related; boundary="${related}"`,
    '',
    `--${related}`,
    `Content-Type: multipart/alternative; boundary="${alt}"`,
    '',
    `--${alt}`,
    'Content-Type: text/plain; charset="UTF-8"',
    '',
    '** Address not found **',
    '',
    `Your message wasn't delivered to ${to} because the address couldn't be found.`,
    '',
    `--${alt}`,
    'Content-Type: text/html; charset="UTF-8"',
    '',
    '<html><body><h2>Address not found</h2></body></html>',
    `--${alt}--`,
    `--${related}`,
    'Content-Type: image/png; name="icon.png"',
    'Content-Disposition: attachment; filename="icon.png"',
    'Content-Transfer-Encoding: base64',
    'Content-ID: <icon.png>',
    '',
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    `--${related}--`,
    `--${outer}`,
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; googlemail.com',
    'Received-From-MTA: dns; relay.example.net',
    'Arrival-Date: Mon, 01 Dec 2026 00:00:00 -0800 (PST)',
    'X-Original-Message-ID: ' + email.messageId,
    '',
    `Final-Recipient: rfc822; ${to}`,
    'Action: failed',
    'Status: 5.1.1',
    'Remote-MTA: dns; gmail-smtp-in.l.google.com. (2607:f8b0:4023:c03::1a, the server for the domain example.com.)',
    "Diagnostic-Code: smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try",
    " 550-5.1.1 double-checking the recipient's email address for typos or",
    ' 550 5.1.1 https://support.google.com/mail/?p=NoSuchUser',
    'Last-Attempt-Date: Mon, 01 Dec 2026 00:00:01 -0800 (PST)',
    '',
    `--${outer}`,
    'Content-Type: message/rfc822',
    '',
    originalHeaders(to, email.messageId),
    '',
    '<p>News</p>',
    `--${outer}--`,
    '',
  ].join('\r\n');
  await deliver([bounces.addressFor(email.emailId, DOMAIN)], dsn);
  expect(await emailRow(email.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await suppressed(to)).toBe('hard_bounce');
  const [bounced] = (await eventsNamed('email.bounced')).filter((e) => e.data.emailId === email.emailId);
  expect(bounced!.data.diagnostic).toMatch(/^smtp; 550-5\.1\.1 The email account .* 550 5\.1\.1 https:\/\/support\.google\.com/);
});

test('4.x.x reports, delayed or given up on, are soft bounces: no suppression', async () => {
  const [delayed, expired] = [await sent('dan-delayed@example.net'), await sent('dan-expired@example.net')];
  for (const [email, to, action, status] of [
    [delayed, 'dan-delayed@example.net', 'delayed', '4.4.1'],
    [expired, 'dan-expired@example.net', 'failed', '4.4.7'],
  ] as const) {
    const address = bounces.addressFor(email.emailId, DOMAIN);
    await deliver([address], postfixDsn(to, address, email.messageId, action, status, `451 ${status} mailbox temporarily unavailable`));
    expect(await emailRow(email.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'soft' });
    expect(await suppressed(to)).toBeUndefined();
  }
  const soft = (await eventsNamed('email.bounced')).filter((e) => [delayed.emailId, expired.emailId].includes(e.data.emailId as string));
  expect(soft.map((e) => e.data.bounceType)).toEqual(['soft', 'soft']);
});

/** A feedback-loop report (ARF) about the message with `messageId`, sent to `to`. */
function arf(reportTo: string, to: string, messageId: string, feedbackType = 'abuse'): string {
  const b = '----=_Part_2718281_828459045.1764547200000';
  return [
    'From: Feedback Loop <fbl@feedback.mailbox.example>',
    `To: ${reportTo}`,
    'Subject: Email Feedback Report for IP 192.0.2.40',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=feedback-report;\r\n\tboundary="${b}"`,
    'Message-ID: <fbl.1764547200.42@feedback.mailbox.example>',
    '',
    `--${b}`,
    'Content-Type: text/plain; charset="US-ASCII"',
    'Content-Transfer-Encoding: 7bit',
    '',
    'This is an email abuse report for an email message received from IP 192.0.2.40.',
    '',
    `--${b}`,
    'Content-Type: message/feedback-report',
    '',
    `Feedback-Type: ${feedbackType}`,
    'User-Agent: MailboxFBL/1.0',
    'Version: 1',
    `Original-Mail-From: <${reportTo}>`,
    'Original-Rcpt-To: <redacted>',
    'Arrival-Date: Mon, 01 Dec 2026 00:00:00 +0000',
    'Source-IP: 192.0.2.40',
    `Reported-Domain: ${DOMAIN}`,
    '',
    `--${b}`,
    'Content-Type: message/rfc822',
    'Content-Disposition: inline',
    '',
    originalHeaders(to, messageId),
    '',
    '<p>News</p>',
    '',
    `--${b}--`,
    '',
  ].join('\r\n');
}

test('an ARF complaint (abuse) to the bounce address: COMPLAINED, email.complained, suppressed; to a mailbox of the domain, by Message-ID', async () => {
  const [one, two] = [await sent('eve-fbl@example.com'), await sent('eve-fbl-2@example.com')];
  await deliver([bounces.addressFor(one.emailId, DOMAIN)], arf(bounces.addressFor(one.emailId, DOMAIN), 'eve-fbl@example.com', one.messageId));
  expect(await emailRow(one.emailId)).toMatchObject({ status: 'COMPLAINED' });
  expect(await suppressed('eve-fbl@example.com')).toBe('complaint');
  // The address a feedback loop is registered with is the domain's own; the returned copy names the email.
  await deliver([`fbl@${DOMAIN}`], arf(`fbl@${DOMAIN}`, 'eve-fbl-2@example.com', two.messageId));
  expect(await emailRow(two.emailId)).toMatchObject({ status: 'COMPLAINED' });
  expect(await suppressed('eve-fbl-2@example.com')).toBe('complaint');
  const complained = (await eventsNamed('email.complained')).map((e) => [e.contact_id, e.data.emailId]);
  expect(complained).toEqual(expect.arrayContaining([[one.contactId, one.emailId], [two.contactId, two.emailId]]));
  // Neither report is mail from someone: no email.received.
  expect((await eventsNamed('email.received')).filter((e) => String(e.data.from).includes('fbl'))).toEqual([]);
});

test('a reply to one of our emails at the verified domain: email.received on a new, unsubscribed contact, raw kept, in the feed', async () => {
  const email = await sent('frank-reply@example.net');
  const sender = `grace-${randomUUID().slice(0, 6)}@example.net`;
  const raw = [
    `From: Grace <${sender}>`,
    `To: Hello <hello@${DOMAIN}>`,
    'Subject: Re: News',
    'Date: Mon, 1 Dec 2026 10:00:00 +0000',
    'Message-ID: <CAF=reply-1@mail.example.net>',
    `In-Reply-To: ${email.messageId}`,
    `References: <unrelated@example.net> ${email.messageId}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Thanks, that helps a lot.',
    '',
    '> News',
    '',
  ].join('\r\n');
  await deliver([`hello@${DOMAIN}`], raw, sender);
  const [received] = (await eventsNamed('email.received')).filter((e) => e.data.from === sender);
  expect(received!.data).toMatchObject({ subject: 'Re: News', messageId: '<CAF=reply-1@mail.example.net>', emailId: email.emailId });
  expect(received!.data.text).toContain('Thanks, that helps a lot.');
  const contact = await env.http().get(`/contacts/${received!.contact_id}`).set(bearer(project.secretKey));
  expect(contact.body).toMatchObject({ email: sender, subscribed: false });
  const kept = readFileSync(path.join(dataDir, received!.data.rawKey as string));
  expect((await simpleParser(kept)).messageId).toBe('<CAF=reply-1@mail.example.net>');
  expect(received!.data.rawKey).toMatch(new RegExp(`^inbound/${project.id}/[0-9a-f]{32}\\.eml$`));
  const feed = await env.http().get('/activity').query({ type: 'email.received' }).set(bearer(project.secretKey));
  expect(feed.status).toBe(200);
  expect(feed.body.data).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'email.received', contactId: received!.contact_id })]));
});

test('refused at RCPT with 5xx, nothing recorded: a forged bounce address, a bounce address of no email, a domain nobody owns', async () => {
  const email = await sent('henry-forged@example.net');
  const genuine = bounces.addressFor(email.emailId, DOMAIN);
  const forged = genuine.replace(/\.([0-9a-f]{16})@/, (_, sig: string) => `.${sig.slice(0, 15)}${sig.endsWith('0') ? '1' : '0'}@`);
  const unknownEmail = bounces.addressFor(randomUUID(), DOMAIN);
  const before = await eventCount();
  for (const to of [forged, unknownEmail, `bounce+${email.emailId}@bounces.${DOMAIN}`, 'someone@nobody-owns-this.example', `hello@${DOMAIN}.evil.example`]) {
    const err = await refusal([to], postfixDsn('henry-forged@example.net', to, email.messageId, 'failed', '5.1.1', '550 5.1.1 no such user'));
    expect(err?.code).toBe('EENVELOPE');
    expect(err?.rejectedErrors?.[0]?.responseCode).toBe(550);
  }
  expect(await emailRow(email.emailId)).toMatchObject({ status: 'SENT', bounce_type: null });
  expect(await suppressed('henry-forged@example.net')).toBeUndefined();
  expect(await eventCount()).toBe(before);
});

test('a message over the size cap is refused with 552 and nothing is recorded', async () => {
  const sender = `ivan-${randomUUID().slice(0, 6)}@example.net`;
  const big = [`From: ${sender}`, `To: hello@${DOMAIN}`, 'Subject: big', '', ...Array.from({ length: 2000 }, () => 'x'.repeat(76)), ''].join('\r\n');
  expect(big.length).toBeGreaterThan(MAX_BYTES);
  const before = await eventCount();
  const err = await refusal([`hello@${DOMAIN}`], big);
  expect(err?.responseCode).toBe(552);
  expect(await eventCount()).toBe(before);
  const contact = await queryOne(env.orm.em.fork(), 'select id from contacts where project_id = ? and email = ?', [project.id, sender]);
  expect(contact).toBeUndefined();
});

test('through the pipeline: MAIL FROM is the From address until the return-path records check out, then the signed bounce address, which a DSN maps back', async () => {
  const before = await sent('judy-before@example.net');
  expect(before.relayed.envelope.from).toBe(`hello@${DOMAIN}`);
  const rp = domain.records.filter((r) => r.purpose === 'return-path');
  expect(rp).toEqual([
    { type: 'MX', name: `bounces.${DOMAIN}`, value: `10 ${env.deps.config.returnPath.mxHost}`, purpose: 'return-path' },
    { type: 'TXT', name: `bounces.${DOMAIN}`, value: `v=spf1 include:${DOMAIN} ~all`, purpose: 'return-path' },
  ]);
  sending.dns.set(`bounces.${DOMAIN}`, 'MX', [{ exchange: env.deps.config.returnPath.mxHost, priority: 10 }]);
  sending.dns.set(`bounces.${DOMAIN}`, 'TXT', [`v=spf1 include:${DOMAIN} ~all`]);
  const checked = await env.http().get(`/domains/${domain.id}/verify`).set(bearer(project.secretKey));
  expect(checked.status).toBe(200);
  expect(checked.body).toMatchObject({ status: 'verified', lastCheck: { returnPath: { ready: true }, records: { returnPathMx: 'ok', returnPathSpf: 'ok' } } });
  expect(checked.body.returnPathVerifiedAt).not.toBeNull();

  // The mailer learns of it on its next reload (as often as domains are checked: every second here).
  const email = await waitUntil(async () => {
    const e = await sent(`judy-${randomUUID().slice(0, 6)}@example.net`);
    return e.relayed.envelope.from !== `hello@${DOMAIN}` && e;
  });
  expect(email.relayed.envelope.from).toBe(bounces.addressFor(email.emailId, DOMAIN));
  expect(email.relayed.envelope.from).toMatch(new RegExp(`^bounce\\+${email.emailId}\\.[0-9a-f]{16}@bounces\\.${DOMAIN.replace(/\./g, '\\.')}$`));

  const to = email.relayed.envelope.to[0]!;
  await deliver([email.relayed.envelope.from], postfixDsn(to, email.relayed.envelope.from, email.messageId, 'failed', '5.1.1', '550 5.1.1 no such user'));
  expect(await emailRow(email.emailId)).toMatchObject({ status: 'BOUNCED', bounce_type: 'hard' });
  expect(await suppressed(to)).toBe('hard_bounce');
});
