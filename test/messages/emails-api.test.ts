import { randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, type TestEnv } from '../helpers/env';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * GET /emails/:id and GET /emails over the real send path: what an API user sees of an email that
 * went, one the relay keeps deferring (4xx, or unreachable), one it refuses (5xx), and the
 * campaign path's attempts.
 */

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

const DOMAIN = 'acme-emails.test';
const OTHER_DOMAIN = 'other-emails.test';

interface Engagement {
  count: number;
  first: string | null;
  last: string | null;
}

interface EmailDetail {
  id: string;
  status: string;
  source: string;
  campaignId: string | null;
  templateId: string | null;
  contact: { id: string; email: string } | null;
  to: string;
  from: string;
  subject: string;
  attempts: number;
  lastAttemptAt: string | null;
  relayResponse: string | null;
  error: string | null;
  createdAt: string;
  sentAt: string | null;
  updatedAt: string;
  deliveredAt: string | null;
  bouncedAt: string | null;
  bounceType: string | null;
  complainedAt: string | null;
  opens: Engagement;
  clicks: Engagement & { links: { url: string; first: string }[] };
}

interface EmailSummary {
  id: string;
  status: string;
  contactId: string | null;
  createdAt: string;
}

interface Page {
  data: EmailSummary[];
  cursor: string | null;
  hasMore: boolean;
  total: number;
}

const getEmail = async (id: string, p = project) => {
  const res = await env.http().get(`/emails/${id}`).set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  return res.body as EmailDetail;
};

const listEmails = async (query: Record<string, string | number>, p = project) => {
  const res = await env.http().get('/emails').query(query).set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  return res.body as Page;
};

/** Sends one email through /v1/send; returns its id and its contact's. */
async function send(to: string, extra: Record<string, unknown> = {}) {
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to, from: `hello@${DOMAIN}`, subject: `For ${to}`, body: '<p>Hello</p>', ...extra });
  expect(res.status).toBe(200);
  return { id: res.body.data.emails[0].email as string, contactId: res.body.data.emails[0].contact.id as string };
}

/** Polls GET /emails/:id until `ok` holds for what it returns. */
const waitForEmail = (id: string, ok: (e: EmailDetail) => boolean, p = project) =>
  waitUntil(async () => {
    const email = await getEmail(id, p);
    return ok(email) && email;
  });

const appPath = (url: string) => {
  expect(url.startsWith('http://localhost:3000/')).toBe(true);
  return url.slice('http://localhost:3000'.length);
};

beforeAll(async () => {
  sending = await startSendingEnv();
  ({ env, smtp } = sending);
  project = await env.project('emails project');
  other = await env.project('another project');
  await sending.verifiedDomain(project, DOMAIN);
  await sending.verifiedDomain(other, OTHER_DOMAIN);
});

afterAll(() => sending.close());

beforeEach(() => {
  smtp.clear();
  smtp.clearFailures();
});

test('a delivered email: SENT after one attempt with the 250 line; opens and clicks as the tracking endpoints record them', async () => {
  const { id, contactId } = await send('ada@example.org', {
    tracking: true,
    body: '<html><body><p>Hello</p><a href="https://shop.example.com/pricing">Pricing</a></body></html>',
  });
  const sent = await waitForEmail(id, (e) => e.status === 'SENT');
  expect(sent).toMatchObject({
    id,
    source: 'transactional',
    campaignId: null,
    templateId: null,
    contact: { id: contactId, email: 'ada@example.org' },
    to: 'ada@example.org',
    from: `hello@${DOMAIN}`,
    subject: 'For ada@example.org',
    attempts: 1,
    error: null,
    deliveredAt: null,
    bouncedAt: null,
    bounceType: null,
    complainedAt: null,
    opens: { count: 0, first: null, last: null },
    clicks: { count: 0, first: null, last: null, links: [] },
  });
  expect(sent.relayResponse).toMatch(/^250 /);
  expect(sent.sentAt).not.toBeNull();
  expect(sent.lastAttemptAt).not.toBeNull();
  expect(Date.parse(sent.lastAttemptAt!)).toBeLessThanOrEqual(Date.parse(sent.sentAt!));
  expect(sent).not.toHaveProperty('body');

  const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes('ada@example.org')));
  const html = String((await simpleParser(message.raw)).html);
  const pixel = /<img src="([^"]+)" width="1"/.exec(html)![1]!;
  const link = /<a href="([^"]+)">Pricing<\/a>/.exec(html)![1]!;
  expect((await env.http().get(appPath(pixel))).status).toBe(200);
  expect((await env.http().get(appPath(link)).redirects(0)).status).toBe(302);

  const engaged = await getEmail(id);
  expect(engaged.status).toBe('CLICKED');
  expect(engaged.opens.count).toBe(1);
  expect(engaged.opens.first).not.toBeNull();
  expect(engaged.opens.last).toBe(engaged.opens.first);
  expect(engaged.clicks).toMatchObject({ count: 1, links: [{ url: 'https://shop.example.com/pricing' }] });
  expect(engaged.clicks.last).toBe(engaged.clicks.first);
  expect(engaged.clicks.links[0]!.first).toBe(engaged.clicks.first);

  // A second open moves the last one, not the first.
  expect((await env.http().get(appPath(pixel))).status).toBe(200);
  const reopened = await getEmail(id);
  expect(reopened.opens.count).toBe(2);
  expect(reopened.opens.first).toBe(engaged.opens.first);
  expect(Date.parse(reopened.opens.last!)).toBeGreaterThan(Date.parse(engaged.opens.last!));
});

test('a deferred email (451) shows its growing attempts and the reply while retried, then SENT once the relay takes it', async () => {
  smtp.failNext(451, 1_000_000);
  const { id } = await send('deferred@example.org');
  const first = await waitForEmail(id, (e) => e.attempts >= 1 && e.relayResponse !== null);
  expect(['QUEUED', 'SENDING']).toContain(first.status);
  expect(first.relayResponse).toMatch(/451/);
  expect(first.error).toMatch(/451/);
  expect(first.sentAt).toBeNull();
  const later = await waitForEmail(id, (e) => e.attempts > first.attempts);
  expect(['QUEUED', 'SENDING']).toContain(later.status);
  expect(Date.parse(later.lastAttemptAt!)).toBeGreaterThan(Date.parse(first.lastAttemptAt!));
  expect(smtp.messages).toHaveLength(0);

  smtp.clearFailures();
  const sent = await waitForEmail(id, (e) => e.status === 'SENT');
  // `later` counted an attempt as it began; that very attempt may be the one the recovered relay took.
  expect(sent.attempts).toBeGreaterThanOrEqual(later.attempts);
  expect(smtp.messages).toHaveLength(1);
  expect(sent.relayResponse).toMatch(/^250 /);
  expect(sent.error).toBeNull();
});

test('with the relay unreachable the email waits QUEUED saying why, no attempt counted; recovery sends it', async () => {
  await smtp.stop();
  try {
    const { id } = await send('unreachable@example.org');
    const waiting = await waitForEmail(id, (e) => e.status === 'QUEUED' && e.error !== null);
    expect(waiting.attempts).toBe(0);
    expect(waiting.error).toMatch(/^Relay unreachable: .*ECONNREFUSED/);
    expect(waiting.relayResponse).toBe(waiting.error);
    await smtp.restart();
    const sent = await waitForEmail(id, (e) => e.status === 'SENT');
    expect(sent.relayResponse).toMatch(/^250 /);
    expect(sent.error).toBeNull();
    expect(sent.attempts).toBe(1);
  } finally {
    if (!smtp.running) await smtp.restart();
  }
});

test('a refused recipient (550) is a hard bounce after one attempt, with the reply', async () => {
  // By recipient, not "the next message": an email of an earlier test may still be in retry.
  smtp.failRecipient(/^refused@example\.org$/, 550);
  const { id } = await send('refused@example.org');
  const bounced = await waitForEmail(id, (e) => e.status === 'BOUNCED');
  expect(bounced.attempts).toBe(1);
  expect(bounced.bounceType).toBe('hard');
  expect(bounced.relayResponse).toMatch(/550/);
  expect(bounced.error).toBe(bounced.relayResponse);
  expect(bounced.sentAt).toBeNull();
});

test("404 for an unknown email and for another project's; 422 for a malformed id", async () => {
  const { id } = await send('mine@example.org');
  const expectNotFound = async (emailId: string, p: ProjectWithKeys) => {
    const res = await env.http().get(`/emails/${emailId}`).set(bearer(p.secretKey));
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ success: false, error: { code: 'EMAIL_NOT_FOUND', statusCode: 404 } });
  };
  await expectNotFound(randomUUID(), project);
  await expectNotFound(id, other);
  expect((await listEmails({}, other)).data.map((e) => e.id)).not.toContain(id);

  const malformed = await env.http().get('/emails/not-an-id').set(bearer(project.secretKey));
  expect(malformed.status).toBe(422);
  expect(malformed.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', statusCode: 422 } });
  expect(malformed.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['params.id']);

  expect((await env.http().get(`/emails/${id}`)).status).toBe(401);
});

test('the list: newest first, filtered by contact and by status, every email once when paged one by one', async () => {
  smtp.failRecipient(/^l-refused@example\.org$/, 550);
  const refused = await send('l-refused@example.org');
  await waitForEmail(refused.id, (x) => x.status === 'BOUNCED');
  // Three recipients in one request share their creation time: paging must still tell them apart.
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: ['l1@example.org', 'l2@example.org', 'l3@example.org'], from: `hello@${DOMAIN}`, subject: 'List', body: 'B' });
  expect(res.status).toBe(200);
  const batch = (res.body.data.emails as { email: string; contact: { id: string } }[]).map((e) => ({ id: e.email, contactId: e.contact.id }));
  const again = await send('l1@example.org');
  for (const e of [...batch, again]) await waitForEmail(e.id, (x) => x.status === 'SENT');

  const all = await listEmails({ limit: 100 });
  expect(all.hasMore).toBe(false);
  expect(all.total).toBe(all.data.length);
  const times = all.data.map((e) => Date.parse(e.createdAt));
  expect(times).toEqual([...times].sort((a, b) => b - a));
  expect(all.data[0]!.id).toBe(again.id);
  expect(new Set(all.data.map((e) => e.id)).size).toBe(all.data.length);

  const paged: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Page = await listEmails(cursor ? { limit: 1, cursor } : { limit: 1 });
    expect(page.total).toBe(pages === 0 ? all.total : 0);
    expect(page.data).toHaveLength(1);
    paged.push(page.data[0]!.id);
    cursor = page.cursor;
    expect(page.hasMore).toBe(cursor !== null);
    pages += 1;
  } while (cursor);
  expect(paged).toEqual(all.data.map((e) => e.id));

  const ofContact = await listEmails({ contactId: batch[0]!.contactId });
  expect(ofContact.data.map((e) => e.id)).toEqual([again.id, batch[0]!.id]);
  expect(ofContact.total).toBe(2);

  const bounced = await listEmails({ status: 'BOUNCED', limit: 100 });
  expect(bounced.data.map((e) => e.id)).toContain(refused.id);
  expect(bounced.data.every((e) => e.status === 'BOUNCED')).toBe(true);
  expect(bounced.data.map((e) => e.id)).toEqual(all.data.filter((e) => e.status === 'BOUNCED').map((e) => e.id));
  expect((await listEmails({ status: 'SENT', contactId: batch[1]!.contactId })).data.map((e) => e.id)).toEqual([batch[1]!.id]);

  const badStatus = await env.http().get('/emails').query({ status: 'LOST' }).set(bearer(project.secretKey));
  expect(badStatus.status).toBe(422);
  expect(badStatus.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['query.status']);
  const badCursor = await env.http().get('/emails').query({ cursor: 'bm9wZQ' }).set(bearer(project.secretKey));
  expect(badCursor.status).toBe(400);
  expect(badCursor.body.error.code).toBe('INVALID_CURSOR');
});

test('campaign emails count their attempts: a deferred one is retried and SENT, a refused one BOUNCED with the reply', async () => {
  const auth = bearer(other.secretKey);
  for (const email of ['camp-ok@example.org', 'camp-refused@example.org']) {
    expect((await env.http().post('/contacts').set(auth).send({ email })).status).toBe(201);
  }
  smtp.failRecipient('camp-refused@example.org', 550);
  // The first message that reaches DATA is deferred: the good recipient's first attempt.
  smtp.failNext(451, 1);
  const created = await env
    .http()
    .post('/campaigns')
    .set(auth)
    .send({ name: 'Attempts', subject: 'Hi', body: '<p>Hi</p>', from: `news@${OTHER_DOMAIN}` });
  expect(created.status).toBe(201);
  expect((await env.http().post(`/campaigns/${created.body.id}/send`).set(auth).send({})).status).toBe(200);

  const emails = await waitUntil(async () => {
    const page = await listEmails({ limit: 100 }, other);
    const mine = page.data.filter((e) => e.status === 'SENT' || e.status === 'BOUNCED');
    return mine.length === 2 && page.data;
  }, 30_000);
  const details = await Promise.all(emails.map((e) => getEmail(e.id, other)));
  const ok = details.find((d) => d.to === 'camp-ok@example.org')!;
  const refused = details.find((d) => d.to === 'camp-refused@example.org')!;
  expect(ok).toMatchObject({ status: 'SENT', source: 'campaign', campaignId: created.body.id, attempts: 2, error: null });
  expect(ok.relayResponse).toMatch(/^250 /);
  expect(ok.lastAttemptAt).not.toBeNull();
  expect(refused).toMatchObject({ status: 'BOUNCED', bounceType: 'hard', source: 'campaign', attempts: 1 });
  expect(refused.relayResponse).toMatch(/550/);
});
