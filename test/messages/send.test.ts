import { Resolver } from 'node:dns/promises';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { MockActivityEnvironment } from '@temporalio/testing';
import { planEmails, prepareEmail, writeEmails } from '../../db/messages/prepare';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { createSmtpMailer } from '../../mail/transport';
import { createSendActivities } from '../../temporal/delivery/send-emails-activities';
import { workflowIds } from '../../temporal/ids';
import { ProjectIdKey } from '../../temporal/search-attributes';
import type { DnsServer } from '../helpers/dns';
import { bearer, type TestEnv } from '../helpers/env';
import { deliveriesSettled, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

let sending: SendingEnv;
let dns: DnsServer;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;

const DOMAIN = 'acme-send.test';

const emailStatus = async (id: string) =>
  (await queryOne<{ status: string }>(env.orm.em.fork(), 'select status from emails where id = ?', [id]))?.status;

beforeAll(async () => {
  sending = await startSendingEnv();
  ({ env, dns, smtp } = sending);
  project = await env.project();
  await sending.verifiedDomain(project, DOMAIN);
});

afterAll(() => sending.close());

beforeEach(() => {
  smtp.clear();
  smtp.clearFailures();
});

test('a sent email arrives rendered, signed, with headers and byte-exact attachments', async () => {
  const binary = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) % 256));
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({
      to: { name: 'Ada Lovelace', email: 'ada@example.org' },
      from: { name: 'Acme', email: `hello@${DOMAIN}` },
      reply: `support@${DOMAIN}`,
      subject: 'Hi {{name}}, your code is {{code}}',
      body: '<p>Plan: {{plan ?? "free"}} / {{company.name}}</p>',
      data: { code: { value: 'X-42', persistent: false }, company: { name: 'Analytical' } },
      headers: { 'X-Campaign': 'launch' },
      attachments: [
        { filename: 'data.bin', content: binary.toString('base64'), contentType: 'application/octet-stream' },
        { filename: 'note.txt', content: Buffer.from('hello').toString('base64'), contentType: 'text/plain' },
      ],
    });
  expect(res.status).toBe(200);
  expect(res.body.success).toBe(true);
  const [item] = res.body.data.emails;
  expect(item.contact.email).toBe('ada@example.org');
  expect(item.email).toMatch(/^[0-9a-f-]{36}$/);
  expect(new Date(res.body.data.timestamp).toISOString()).toBe(res.body.data.timestamp);

  const [message] = await smtp.waitFor(1);
  const parsed = await simpleParser(message!.raw);
  expect(parsed.subject).toBe('Hi Ada Lovelace, your code is X-42');
  expect(parsed.html).toContain('<p>Plan: free / Analytical</p>');
  expect(parsed.from?.value[0]).toEqual({ name: 'Acme', address: `hello@${DOMAIN}` });
  expect(parsed.replyTo?.value[0]?.address).toBe(`support@${DOMAIN}`);
  expect(parsed.headers.get('x-campaign')).toBe('launch');
  expect(parsed.messageId).toBe(`<${item.email}@${DOMAIN}>`);
  expect(parsed.attachments.map((a) => a.filename)).toEqual(['data.bin', 'note.txt']);
  expect(Buffer.compare(parsed.attachments[0]!.content, binary)).toBe(0);
  expect(parsed.attachments[1]!.content.toString()).toBe('hello');
  // Transactional mail carries no List-Unsubscribe.
  expect(parsed.headers.has('list-unsubscribe')).toBe(false);

  const resolver = new Resolver();
  resolver.setServers([dns.address]);
  const dkim = await dkimVerify(message!.raw, { resolver: (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') });
  expect(dkim.results[0]?.status.result).toBe('pass');
  expect(dkim.results[0]?.signingDomain).toBe(DOMAIN);

  await waitUntil(async () => (await emailStatus(item.email)) === 'SENT');
  // The one-shot code was used for this send and stored nowhere.
  const contact = await env.http().get(`/contacts/${item.contact.id}`).set(bearer(project.secretKey));
  expect(contact.body.data).toEqual({ name: 'Ada Lovelace', company: { name: 'Analytical' } });
  expect(contact.body.subscribed).toBe(false);
});

test('each recipient is upserted and rendered on its own', async () => {
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({
      to: ['one@example.org', { name: 'Two', email: 'two@example.org' }],
      from: `hello@${DOMAIN}`,
      name: 'Legacy Name',
      subject: 'For {{email}}',
      body: 'Hello {{name ?? "there"}}',
    });
  expect(res.status).toBe(200);
  expect(res.body.data.emails.map((e: { contact: { email: string } }) => e.contact.email)).toEqual(['one@example.org', 'two@example.org']);
  const messages = await smtp.waitFor(2);
  const parsed = await Promise.all(messages.map((m) => simpleParser(m.raw)));
  const byTo = Object.fromEntries(parsed.map((p) => [p.to && !Array.isArray(p.to) ? p.to.value[0]!.address : '', p]));
  expect(byTo['one@example.org']!.subject).toBe('For one@example.org');
  expect(byTo['one@example.org']!.text?.trim()).toBe('Hello there');
  expect(byTo['two@example.org']!.text?.trim()).toBe('Hello Two');
  expect(parsed[0]!.from?.value[0]!.name).toBe('Legacy Name');
});

test('refusals: unverified domain, bad subject, headers, attachments, missing content', async () => {
  const send = (body: object) => env.http().post('/v1/send').set(bearer(project.secretKey)).send(body);
  const base = { to: 'x@example.org', from: `hello@${DOMAIN}`, subject: 'S', body: 'B' };

  const unverified = await send({ ...base, from: 'me@not-ours.test' });
  expect(unverified.status).toBe(403);
  expect(unverified.body.error.code).toBe('DOMAIN_NOT_VERIFIED');

  const fieldsOf = (r: { body: { error: { errors: { field: string }[] } } }) => r.body.error.errors.map((e) => e.field);
  const newline = await send({ ...base, subject: 'a\nb' });
  expect(newline.status).toBe(422);
  expect(fieldsOf(newline)).toContain('subject');
  const long = await send({ ...base, subject: 'x'.repeat(999) });
  expect(long.status).toBe(422);
  expect(fieldsOf(long)).toContain('subject');
  const crlf = await send({ ...base, headers: { 'X-Evil': 'a\r\nBcc: victim@example.org' } });
  expect(crlf.status).toBe(422);
  expect(fieldsOf(crlf)).toContain('headers.X-Evil');
  const badName = await send({ ...base, headers: { 'X-Bad\nName': 'v' } });
  expect(badName.status).toBe(422);
  const eleven = await send({
    ...base,
    attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `${i}.txt`, content: 'aGk=', contentType: 'text/plain' })),
  });
  expect(eleven.status).toBe(422);
  expect(fieldsOf(eleven)).toContain('attachments');
  const noContent = await send({ to: 'x@example.org', from: `hello@${DOMAIN}` });
  expect(noContent.status).toBe(422);
  expect(fieldsOf(noContent)).toEqual(expect.arrayContaining(['subject', 'body']));
  const badTemplate = await send({ ...base, body: '{{#if x}}never closed' });
  expect(badTemplate.status).toBe(422);
  expect(fieldsOf(badTemplate)).toEqual(['body']);

  // No sender: the message says what is missing, with or without a template.
  const noFrom = await send({ to: 'x@example.org', subject: 'S', body: 'B' });
  expect(noFrom.status).toBe(422);
  expect(noFrom.body.error.errors).toEqual([expect.objectContaining({ field: 'from', message: 'Required: give `from`, or a template that has a sender' })]);
  const senderless = await env.http().post('/templates').set(bearer(project.secretKey)).send({ name: 'No sender', subject: 'S', body: 'B' });
  expect(senderless.status).toBe(201);
  const noTemplateFrom = await send({ to: 'x@example.org', template: senderless.body.id });
  expect(noTemplateFrom.status).toBe(422);
  expect(noTemplateFrom.body.error.errors).toEqual([
    expect.objectContaining({ field: 'from', message: `The template ${senderless.body.id} has no sender; give \`from\`` }),
  ]);

  // Nothing was queued by any refusal.
  const row = await queryOne<{ n: string }>(
    env.orm.em.fork(),
    "select count(*) n from emails where project_id = ? and to_email = 'x@example.org'",
    [project.id],
  );
  expect(Number(row!.n)).toBe(0);
});

test('with the relay down the API still answers, and mail arrives once it is back', async () => {
  await smtp.stop();
  try {
    const res = await env
      .http()
      .post('/v1/send')
      .set(bearer(project.secretKey))
      .send({ to: 'later@example.org', from: `hello@${DOMAIN}`, subject: 'Later', body: 'Queued' });
    expect(res.status).toBe(200);
    const id = res.body.data.emails[0].email;
    // An attempt has found the relay down, and said so on the email.
    const attempted = await waitUntil(async () => {
      const row = await queryOne<{ status: string; error: string | null }>(env.orm.em.fork(), 'select status, error from emails where id = ?', [id]);
      return row?.error ? row : undefined;
    });
    expect(attempted.error).toMatch(/ECONNREFUSED/);
    expect(smtp.messages).toHaveLength(0);
    expect(attempted.status).not.toBe('SENT');
    await smtp.restart();
    await smtp.waitFor(1);
    await waitUntil(async () => (await emailStatus(id)) === 'SENT');
  } finally {
    if (!smtp.running) await smtp.restart();
  }
});

test('a permanent 5xx after DATA is a hard bounce, not retried; a 4xx is retried', async () => {
  const send = (to: string) =>
    env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `hello@${DOMAIN}`, subject: 'S', body: 'B' });
  smtp.failNext(550, 1);
  const rejected = await send('rejected@example.org');
  const rejectedId = rejected.body.data.emails[0].email;
  await waitUntil(async () => (await emailStatus(rejectedId)) === 'BOUNCED');

  const bounced = await queryOne<{ error: string; smtp_response: string; attempts: number; bounce_type: string }>(
    env.orm.em.fork(),
    'select error, smtp_response, attempts, bounce_type from emails where id = ?',
    [rejectedId],
  );
  expect(bounced).toMatchObject({ smtp_response: expect.stringContaining('550'), attempts: 1, bounce_type: 'hard' });

  smtp.failNext(451, 2);
  const deferred = await send('deferred@example.org');
  const deferredId = deferred.body.data.emails[0].email;
  // It leaves the fast path for its own retry workflow, which an operator finds by project and email id.
  const retry = env.temporal.client.workflow.getHandle(workflowIds.sendEmails(deferredId));
  await waitUntil(async () => !!(await retry.describe().catch(() => undefined)));
  const described = await retry.describe();
  expect(described.typedSearchAttributes.get(ProjectIdKey)).toBe(project.id);
  // Its backoff ceiling is SEND_RETRY_MAX_INTERVAL_SECONDS.
  const scheduled = await waitUntil(async () => {
    const events = (await retry.fetchHistory()).events!.flatMap((e) => e.activityTaskScheduledEventAttributes ?? []);
    return events.length ? events : undefined;
  });
  expect(Number(scheduled[0]!.retryPolicy!.maximumInterval!.seconds)).toBe(env.deps.config.sendRetryMaxIntervalSeconds);
  // Nobody else's mail waits for it.
  const other = await send('not-held-back@example.org');
  await waitUntil(async () => (await emailStatus(other.body.data.emails[0].email)) === 'SENT');
  await waitUntil(async () => (await emailStatus(deferredId)) === 'SENT');
  expect(smtp.messages.filter((m) => m.envelope.to.includes('deferred@example.org'))).toHaveLength(1);
  expect(smtp.messages.filter((m) => m.envelope.to.includes('rejected@example.org'))).toHaveLength(0);
});

test('a failed status update after the relay accepted does not send the message again', async () => {
  const em = env.orm.em.fork();
  // Real fault injection in PostgreSQL: the first attempt to mark this email SENT fails. A
  // sequence counts the attempts because, unlike a table, it survives the failed transaction.
  await em.getConnection().execute(`
    drop sequence if exists sent_attempts;
    create sequence sent_attempts;
    create or replace function fail_first_sent() returns trigger language plpgsql as $$
    begin
      if new.status = 'SENT' and new.to_email = 'once@example.org' and nextval('sent_attempts') = 1 then
        raise exception 'injected failure';
      end if;
      return new;
    end $$;
    drop trigger if exists fail_first_sent on emails;
    create trigger fail_first_sent before update on emails for each row execute function fail_first_sent();`);
  try {
    const res = await env
      .http()
      .post('/v1/send')
      .set(bearer(project.secretKey))
      .send({ to: 'once@example.org', from: `hello@${DOMAIN}`, subject: 'Once', body: 'Only once' });
    const id = res.body.data.emails[0].email;
    await waitUntil(async () => (await emailStatus(id)) === 'SENT');
    const attempts = await queryOne<{ n: string }>(em, 'select last_value n from sent_attempts');
    expect(Number(attempts!.n)).toBe(2);
    // Sending again would have come before the SENT mark that succeeded, and SENT is final.
    expect(smtp.messages.filter((m) => m.envelope.to.includes('once@example.org'))).toHaveLength(1);
    // The engine wrote the mark again; the email never left the fast path for a retry workflow.
    const row = await queryOne<{ attempts: number }>(em, 'select attempts from emails where id = ?', [id]);
    expect(row!.attempts).toBe(1);
    await expect(env.temporal.client.workflow.getHandle(workflowIds.sendEmails(id)).describe()).rejects.toThrow(/not found/);
  } finally {
    await em.getConnection().execute('drop trigger if exists fail_first_sent on emails; drop sequence if exists sent_attempts;');
  }
});

test('delivery marks the email SENT itself: an attempt retried after the worker died does not send again', async () => {
  const em = env.orm.em.fork();
  const contact = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'retried@example.org' });
  // A queued email no engine claims (queue null): the activity is run here, the way Temporal runs its attempts.
  const plan = await planEmails(
    em,
    {
      projectId: project.id, source: 'transactional', from: { email: `hello@${DOMAIN}`, name: null }, replyTo: null,
      subject: 'Retried', body: 'Once', marketing: false, queue: null,
    },
    { senders: env.deps.config, links: { publicUrl: env.deps.config.publicUrl, linkSecret: 'test' } },
  );
  const [written] = await em.transactional((tx) => writeEmails(tx, [prepareEmail(plan, contact.body)], 'refuse'));
  const emailId = written!.id;
  const mailer = createSmtpMailer(smtp.url);
  try {
    const { deliverEmail } = createSendActivities({ orm: env.orm, mailer, config: env.deps.config });
    const first = await new MockActivityEnvironment().run(deliverEmail, emailId);
    expect(first).toMatchObject({ delivered: true, recorded: true });
    // The attempt's completion never reached Temporal (the worker was killed): the row says SENT anyway.
    expect(await emailStatus(emailId)).toBe('SENT');
    const retried = await new MockActivityEnvironment({ attempt: 2 }).run(deliverEmail, emailId);
    expect(retried).toEqual({ delivered: false, reason: 'already_sent' });
    expect(smtp.messages.filter((m) => m.envelope.to.includes('retried@example.org'))).toHaveLength(1);
  } finally {
    mailer.close();
  }
});

test('the same Idempotency-Key sends once and replays; another body is a 409', async () => {
  const body = { to: 'idem@example.org', from: `hello@${DOMAIN}`, subject: 'Idem', body: 'Once' };
  const key = `key-${Date.now()}`;
  const first = await env.http().post('/v1/send').set(bearer(project.secretKey)).set('Idempotency-Key', key).send(body);
  const second = await env.http().post('/v1/send').set(bearer(project.secretKey)).set('Idempotency-Key', key).send(body);
  expect(first.status).toBe(200);
  expect(second.status).toBe(200);
  expect(second.body).toEqual(first.body);
  expect(second.headers['idempotent-replayed']).toBe('true');
  const other = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .set('Idempotency-Key', key)
    .send({ ...body, subject: 'Different' });
  expect(other.status).toBe(409);
  expect(other.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  // One email was written for the key, and it no longer waits for delivery.
  const rows = await query<{ status: string }>(env.orm.em.fork(), "select status from emails where project_id = ? and to_email = 'idem@example.org'", [project.id]);
  expect(rows).toHaveLength(1);
  await deliveriesSettled(env, "project_id = ? and to_email = 'idem@example.org'", [project.id]);
  expect(smtp.messages.filter((m) => m.envelope.to.includes('idem@example.org'))).toHaveLength(1);
});
