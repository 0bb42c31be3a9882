import { simpleParser, type ParsedMail } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { bearer, type TestEnv } from '../helpers/env';
import { type SendingEnv, startSendingEnv } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * Templates end to end: the real API, a real DNS server for the sender domains (verified by the
 * domain workflow on a real Temporal worker), and a real SMTP sink for what template sends deliver.
 */

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

const DOMAIN = 'tpl-acme.test';
const OTHER_DOMAIN = 'tpl-other.test';

interface Template {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string | null;
  fromName: string | null;
  replyTo: string | null;
  type: 'MARKETING' | 'TRANSACTIONAL';
  createdAt: string;
  updatedAt: string;
}

type Res = { status: number; body: { error?: { code?: string; errors?: { field: string; code: string }[] } } };

function as(p: ProjectWithKeys) {
  const auth = bearer(p.secretKey);
  return {
    create: (body: object) => env.http().post('/templates').set(auth).send(body),
    get: (id: string) => env.http().get(`/templates/${id}`).set(auth),
    patch: (id: string, body: object) => env.http().patch(`/templates/${id}`).set(auth).send(body),
    remove: (id: string) => env.http().delete(`/templates/${id}`).set(auth),
    list: (q: Record<string, string | number> = {}) => env.http().get('/templates').query(q).set(auth),
    duplicate: (id: string) => env.http().post(`/templates/${id}/duplicate`).set(auth),
    usage: (id: string) => env.http().get(`/templates/${id}/usage`).set(auth),
    send: (body: object) => env.http().post('/v1/send').set(auth).send(body),
    contact: (id: string) => env.http().get(`/contacts/${id}`).set(auth),
  };
}

function expectError(res: Res, status: number, code: string) {
  expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
}

const fieldsOf = (res: Res) => (res.body.error?.errors ?? []).map((e) => e.field).sort();

const base = { name: 'Welcome', subject: 'Hello {{name ?? "friend"}}', body: '<p>Hi {{name ?? "friend"}}</p>' };

async function createTemplate(p: ProjectWithKeys, body: object = base): Promise<Template> {
  const res = await as(p).create(body);
  expect(res.status).toBe(201);
  return res.body as Template;
}

/** The message's header lines as sent (unfolded), by lower-cased name. */
function rawHeaders(parsed: ParsedMail): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const { key, line } of parsed.headerLines) {
    const value = line.slice(line.indexOf(':') + 1).replace(/\r?\n[ \t]+/g, ' ').trim();
    out.set(key, [...(out.get(key) ?? []), value]);
  }
  return out;
}

beforeAll(async () => {
  sending = await startSendingEnv();
  ({ env, smtp } = sending);
  [project, other] = await Promise.all([env.project('templates A'), env.project('templates B')]);
  await Promise.all([sending.verifiedDomain(project, DOMAIN), sending.verifiedDomain(other, OTHER_DOMAIN)]);
});

afterAll(() => sending.close());

beforeEach(() => smtp.clear());

test('create, get, patch and delete a template', async () => {
  const before = Date.now();
  const created = await as(project).create({
    ...base,
    description: 'First mail',
    from: `hello@${DOMAIN}`,
    fromName: 'Acme',
    replyTo: `support@${DOMAIN}`,
  });
  expect(created.status).toBe(201);
  const t = created.body as Template;
  expect(t).toEqual({
    id: expect.stringMatching(/^tpl_[0-9a-f]+$/),
    name: 'Welcome',
    description: 'First mail',
    subject: base.subject,
    body: base.body,
    from: `hello@${DOMAIN}`,
    fromName: 'Acme',
    replyTo: `support@${DOMAIN}`,
    type: 'TRANSACTIONAL',
    createdAt: expect.any(String),
    updatedAt: expect.any(String),
  });
  expect(new Date(t.createdAt).getTime()).toBeGreaterThanOrEqual(before - 1000);
  expect(t.updatedAt).toBe(t.createdAt);

  const got = await as(project).get(t.id);
  expect(got.status).toBe(200);
  expect(got.body).toEqual(t);

  const patched = await as(project).patch(t.id, { name: 'Welcome v2', subject: 'Hey {{email}}', type: 'MARKETING', description: null });
  expect(patched.status).toBe(200);
  expect(patched.body).toEqual({
    ...t,
    name: 'Welcome v2',
    subject: 'Hey {{email}}',
    type: 'MARKETING',
    description: null,
    updatedAt: expect.any(String),
  });
  expect(new Date(patched.body.updatedAt).getTime()).toBeGreaterThanOrEqual(new Date(t.updatedAt).getTime());
  expect((await as(project).get(t.id)).body).toEqual(patched.body);

  // null clears an optional field; absent leaves it alone.
  const cleared = await as(project).patch(t.id, { from: null, fromName: null });
  expect(cleared.status).toBe(200);
  expect(cleared.body).toMatchObject({ from: null, fromName: null, replyTo: `support@${DOMAIN}`, name: 'Welcome v2' });

  // Nothing to change is a 422; so are bad values.
  expect((await as(project).patch(t.id, {})).status).toBe(422);
  const badType = await as(project).patch(t.id, { type: 'NEWSLETTER' });
  expect(badType.status).toBe(422);
  expect(fieldsOf(badType)).toEqual(['type']);
  const missing = await as(project).create({ name: 'No content' });
  expect(missing.status).toBe(422);
  expect(fieldsOf(missing)).toEqual(['body', 'subject']);

  const removed = await as(project).remove(t.id);
  expect(removed.status).toBe(200);
  expect(removed.body).toEqual({ id: t.id, deleted: true });
  expectError(await as(project).get(t.id), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await as(project).remove(t.id), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await as(project).patch(t.id, { name: 'x' }), 404, 'TEMPLATE_NOT_FOUND');
});

test('the list pages through 25 templates with a cursor, newest first, each exactly once', async () => {
  const p = await env.project('paging');
  const created: string[] = [];
  for (let i = 0; i < 25; i++) created.push((await createTemplate(p, { ...base, name: `T${i}` })).id);

  const seen: Template[] = [];
  const pages: { size: number; total: number; hasMore: boolean; cursor: string | null }[] = [];
  let cursor: string | undefined;
  do {
    const res = await as(p).list(cursor ? { limit: 10, cursor } : { limit: 10 });
    expect(res.status).toBe(200);
    pages.push({ size: res.body.data.length, total: res.body.total, hasMore: res.body.hasMore, cursor: res.body.cursor });
    seen.push(...res.body.data);
    cursor = res.body.hasMore ? res.body.cursor : undefined;
  } while (cursor);

  expect(pages.map(({ size, total, hasMore }) => ({ size, total, hasMore }))).toEqual([
    { size: 10, total: 25, hasMore: true },
    { size: 10, total: 0, hasMore: true },
    { size: 5, total: 0, hasMore: false },
  ]);
  expect(pages[2]!.cursor).toBeNull();
  const ids = seen.map((t) => t.id);
  expect(new Set(ids).size).toBe(25);
  expect([...ids].sort()).toEqual([...created].sort());
  // Newest first: ids carry their creation time.
  expect(ids).toEqual([...created].sort().reverse());
  expect(seen.find((t) => t.id === created[0])).toMatchObject({ name: 'T0', subject: base.subject, body: base.body });

  const defaults = await as(p).list();
  expect(defaults.body.data).toHaveLength(20);
  expect(defaults.body.total).toBe(25);
  expect((await as(p).list({ limit: 101 })).status).toBe(422);
  expectError((await as(p).list({ cursor: 'not-a-cursor' })) as Res, 400, 'INVALID_CURSOR');
  // Another project sees none of them.
  const foreign = await as(other).list({ limit: 100 });
  expect(foreign.body.data.map((t: Template) => t.id).filter((id: string) => created.includes(id))).toEqual([]);
});

test('a template syntax error is a 422 naming subject or body, on create and on PATCH', async () => {
  const badSubject = await as(project).create({ ...base, subject: 'Hi {{#if x}}' });
  expectError(badSubject, 422, 'VALIDATION_ERROR');
  expect(fieldsOf(badSubject)).toEqual(['subject']);

  const badBody = await as(project).create({ ...base, body: '<p>{{name</p>' });
  expectError(badBody, 422, 'VALIDATION_ERROR');
  expect(fieldsOf(badBody)).toEqual(['body']);

  const both = await as(project).create({ ...base, subject: '{{/if}}', body: '{{#each items}}never closed' });
  expect(both.status).toBe(422);
  expect(fieldsOf(both)).toEqual(['body', 'subject']);

  // Things that would only fail when rendered are refused now too.
  for (const body of ['{{> footer}}', '{{unknownHelper x}}', '{{?? "x"}}']) {
    const res = await as(project).create({ ...base, body });
    expect({ body, status: res.status, fields: fieldsOf(res) }).toEqual({ body, status: 422, fields: ['body'] });
  }

  const t = await createTemplate(project);
  const patchBody = await as(project).patch(t.id, { body: '{{#if a}}x' });
  expect(patchBody.status).toBe(422);
  expect(fieldsOf(patchBody)).toEqual(['body']);
  const patchSubject = await as(project).patch(t.id, { subject: '{{name' });
  expect(patchSubject.status).toBe(422);
  expect(fieldsOf(patchSubject)).toEqual(['subject']);
  // A refused PATCH changes nothing.
  expect((await as(project).get(t.id)).body).toEqual(t);
});

test('`from` must be on a domain verified in this project: 403 DOMAIN_NOT_VERIFIED', async () => {
  const pendingRes = await env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: 'tpl-pending.test' });
  expect(pendingRes.status).toBe(201);

  for (const from of ['x@unregistered.test', 'x@tpl-pending.test', `x@${OTHER_DOMAIN}`]) {
    const res = await as(project).create({ ...base, from });
    expectError(res, 403, 'DOMAIN_NOT_VERIFIED');
  }
  // The domain's case does not matter.
  const upper = await as(project).create({ ...base, from: `x@${DOMAIN.toUpperCase()}` });
  expect(upper.status).toBe(201);

  const t = await createTemplate(project, { ...base, from: `hello@${DOMAIN}` });
  expectError(await as(project).patch(t.id, { from: 'x@tpl-pending.test' }), 403, 'DOMAIN_NOT_VERIFIED');
  expectError(await as(project).patch(t.id, { from: `x@${OTHER_DOMAIN}` }), 403, 'DOMAIN_NOT_VERIFIED');
  expect((await as(project).get(t.id)).body.from).toBe(`hello@${DOMAIN}`);
  const ok = await as(project).patch(t.id, { from: `news@${DOMAIN}` });
  expect(ok.status).toBe(200);
  expect(ok.body.from).toBe(`news@${DOMAIN}`);
});

test('duplicate returns a new template with the same content and a suffixed name; usage is empty', async () => {
  const t = await createTemplate(project, {
    ...base,
    name: 'Digest',
    description: 'Weekly',
    from: `hello@${DOMAIN}`,
    fromName: 'Acme',
    replyTo: `reply@${DOMAIN}`,
    type: 'MARKETING',
  });
  const res = await as(project).duplicate(t.id);
  expect(res.status).toBe(201);
  const copy = res.body as Template;
  expect(copy.id).toMatch(/^tpl_/);
  expect(copy.id).not.toBe(t.id);
  expect(copy).toEqual({ ...t, id: copy.id, name: 'Digest (copy)', createdAt: expect.any(String), updatedAt: expect.any(String) });
  expect((await as(project).get(copy.id)).body).toEqual(copy);
  expect((await as(project).get(t.id)).body).toEqual(t);

  // The copy's name stays within the limit a name has on input.
  const long = await createTemplate(project, { ...base, name: 'n'.repeat(255) });
  const longCopy = await as(project).duplicate(long.id);
  expect(longCopy.status).toBe(201);
  expect(longCopy.body.name).toBe(`${'n'.repeat(248)} (copy)`);
  expect((await as(project).patch(longCopy.body.id, { name: longCopy.body.name })).status).toBe(200);

  const usage = await as(project).usage(t.id);
  expect(usage.status).toBe(200);
  expect(usage.body).toEqual({ campaigns: [], workflowSteps: [] });
  expectError(await as(project).usage('tpl_doesnotexist'), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await as(project).duplicate('tpl_doesnotexist'), 404, 'TEMPLATE_NOT_FOUND');
});

test("another project's template is a 404 everywhere, and stays untouched", async () => {
  const t = await createTemplate(project, { ...base, name: 'Mine' });
  const b = as(other);
  expectError(await b.get(t.id), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await b.patch(t.id, { name: 'Stolen' }), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await b.remove(t.id), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await b.duplicate(t.id), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await b.usage(t.id), 404, 'TEMPLATE_NOT_FOUND');
  expectError(await b.send({ to: 'x@example.org', template: t.id, from: `hi@${OTHER_DOMAIN}` }), 404, 'TEMPLATE_NOT_FOUND');
  expect((await as(project).get(t.id)).body).toEqual(t);
  const foreign = await b.list({ limit: 100 });
  expect(foreign.body.data.map((x: Template) => x.id)).not.toContain(t.id);
});

test('/v1/send with a template uses its subject, body, sender and reply-to; request fields override', async () => {
  const t = await createTemplate(project, {
    name: 'Receipt',
    subject: 'Receipt for {{name ?? "you"}}',
    body: '<p>Thanks {{name ?? "you"}}, plan {{plan}}</p>',
    from: `billing@${DOMAIN}`,
    fromName: 'Acme Billing',
    replyTo: `help@${DOMAIN}`,
  });

  const plain = await as(project).send({ to: { name: 'Ada', email: 'ada@example.org' }, template: t.id, data: { plan: 'pro' } });
  expect(plain.status).toBe(200);
  const [m1] = await smtp.waitFor(1);
  const p1 = await simpleParser(m1!.raw);
  expect(p1.subject).toBe('Receipt for Ada');
  expect(p1.html).toContain('<p>Thanks Ada, plan pro</p>');
  expect(p1.from?.value).toEqual([{ name: 'Acme Billing', address: `billing@${DOMAIN}` }]);
  expect(p1.replyTo?.value.map((v) => v.address)).toEqual([`help@${DOMAIN}`]);
  expect(m1!.envelope.to).toEqual(['ada@example.org']);
  expect(p1.headers.has('list-unsubscribe')).toBe(false);
  const row = await queryOne<{ template_id: string }>(env.orm.em.fork(), 'select template_id from emails where id = ?', [
    plain.body.data.emails[0].email,
  ]);
  expect(row?.template_id).toBe(t.id);

  smtp.clear();
  const overridden = await as(project).send({
    to: 'bob@example.org',
    template: t.id,
    subject: 'Custom for {{email}}',
    from: { name: 'Sales', email: `sales@${DOMAIN}` },
    reply: `sales-reply@${DOMAIN}`,
    data: { plan: 'team' },
  });
  expect(overridden.status).toBe(200);
  const [m2] = await smtp.waitFor(1);
  const p2 = await simpleParser(m2!.raw);
  expect(p2.subject).toBe('Custom for bob@example.org');
  // The body not given in the request still comes from the template.
  expect(p2.html).toContain('<p>Thanks you, plan team</p>');
  expect(p2.from?.value).toEqual([{ name: 'Sales', address: `sales@${DOMAIN}` }]);
  expect(p2.replyTo?.value.map((v) => v.address)).toEqual([`sales-reply@${DOMAIN}`]);

  smtp.clear();
  const bodyOnly = await as(project).send({ to: 'cy@example.org', template: t.id, body: 'Plain {{plan ?? "none"}}' });
  expect(bodyOnly.status).toBe(200);
  const [m3] = await smtp.waitFor(1);
  const p3 = await simpleParser(m3!.raw);
  expect(p3.subject).toBe('Receipt for you');
  expect(p3.text?.trim()).toBe('Plain none');
  expect(p3.from?.value[0]?.address).toBe(`billing@${DOMAIN}`);

  // Overrides are checked as the template is: an unverified sender is refused.
  expectError(await as(project).send({ to: 'x@example.org', template: t.id, from: 'x@unregistered.test' }), 403, 'DOMAIN_NOT_VERIFIED');
  expectError(await as(project).send({ to: 'x@example.org', template: 'tpl_doesnotexist' }), 404, 'TEMPLATE_NOT_FOUND');
  // A template without a sender needs one in the request.
  const senderless = await createTemplate(project, { ...base, name: 'No sender' });
  const noFrom = await as(project).send({ to: 'x@example.org', template: senderless.id });
  expect(noFrom.status).toBe(422);
  expect(fieldsOf(noFrom)).toEqual(['from']);
});

test('a MARKETING template carries one-click List-Unsubscribe headers, and POSTing that URL unsubscribes', async () => {
  const t = await createTemplate(project, {
    name: 'Newsletter',
    subject: 'News',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>',
    from: `news@${DOMAIN}`,
    type: 'MARKETING',
  });
  const res = await as(project).send({ to: 'reader@example.org', template: t.id, subscribed: true });
  expect(res.status).toBe(200);
  const contactId = res.body.data.emails[0].contact.id as string;
  expect((await as(project).contact(contactId)).body.subscribed).toBe(true);

  const [message] = await smtp.waitFor(1);
  const parsed = await simpleParser(message!.raw);
  const headers = rawHeaders(parsed);
  expect(headers.get('list-unsubscribe-post')).toEqual(['List-Unsubscribe=One-Click']);
  const listUnsubscribe = headers.get('list-unsubscribe');
  expect(listUnsubscribe).toHaveLength(1);
  const url = /^<(http:\/\/localhost:3000\/unsubscribe\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)>$/.exec(listUnsubscribe![0]!)?.[1];
  expect(url).toBeDefined();
  // The same link as the body's {{unsubscribeUrl}}.
  expect(parsed.html).toContain(`<a href="${url}">Unsubscribe</a>`);

  const path = new URL(url!).pathname;
  // Opening the link (a GET, as link scanners do) does not unsubscribe.
  const page = await env.http().get(path);
  expect(page.status).toBe(200);
  expect((await as(project).contact(contactId)).body.subscribed).toBe(true);

  // RFC 8058: the mail client POSTs "List-Unsubscribe=One-Click" to the URL.
  const click = await env.http().post(path).type('form').send('List-Unsubscribe=One-Click');
  expect(click.status).toBe(200);
  expect((await as(project).contact(contactId)).body.subscribed).toBe(false);

  // A tampered token unsubscribes nobody.
  const tampered = await env
    .http()
    .post(`${path.slice(0, -1)}${path.endsWith('A') ? 'B' : 'A'}`)
    .type('form')
    .send('List-Unsubscribe=One-Click');
  expect(tampered.status).toBe(404);
});
