import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { signContactToken } from '../../mail/links';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * Marketing mail without a link to the unsubscribe or manage page gets a footer with one, on every
 * path that sends it: /v1/send with a MARKETING template, campaigns (and their test copies), and
 * journey steps. Transactional mail never does.
 */
let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let project: ProjectWithKeys;

const DOMAIN = 'acme-footer.test';
const PROJECT_NAME = 'Acme & "Sons" <News>';
const FOOTER_TEXT = 'You are receiving this because you subscribed to Acme &amp; &quot;Sons&quot; &lt;News&gt;.';

const auth = () => bearer(project.secretKey);
const unsubscribeUrlOf = (contactId: string) => `${env.deps.config.publicUrl}/unsubscribe/${signContactToken(env.deps.linkSecret, contactId)}`;
const appPath = (url: string) => url.slice(env.deps.config.publicUrl.length);
const footerCount = (html: string) => html.split('You are receiving this because').length - 1;
const hrefs = (html: string) => [...html.matchAll(/<a [^>]*href="([^"]*)"[^>]*>([^<]*)<\/a>/g)].map((m) => ({ href: m[1]!.replace(/&amp;/g, '&'), text: m[2]! }));

async function template(body: string, type: 'MARKETING' | 'TRANSACTIONAL' = 'MARKETING'): Promise<string> {
  const res = await env.http().post('/templates').set(auth()).send({ name: 'T', subject: 'News', body, from: `news@${DOMAIN}`, type });
  expect(res.status).toBe(201);
  return res.body.id;
}

async function received(to: string): Promise<{ html: string; raw: string }> {
  const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes(to)));
  return { html: String((await simpleParser(message.raw)).html).trim(), raw: message.raw.toString('utf8') };
}

/** Sends to `to` with a fresh contact (subscribed) and returns what arrived and the contact's id. */
async function sendAndReceive(to: string, body: Record<string, unknown>) {
  const res = await env.http().post('/v1/send').set(auth()).send({ to, subscribed: true, ...body });
  expect(res.status).toBe(200);
  return { ...(await received(to)), contactId: res.body.data.emails[0].contact.id as string };
}

beforeAll(async () => {
  sending = await startSendingEnv();
  ({ env, smtp } = sending);
  project = await env.project(PROJECT_NAME);
  await sending.verifiedDomain(project, DOMAIN);
});

afterAll(() => sending.close());

test('a MARKETING template without the link gets the footer, whose link unsubscribes', async () => {
  const tpl = await template('<html><body><p>News for {{email}}</p><a href="https://example.com/read">Read</a></body></html>');
  const { html, raw, contactId } = await sendAndReceive('reader@example.org', { template: tpl });
  expect(footerCount(html)).toBe(1);
  expect(html).toContain(FOOTER_TEXT);
  // Inside the document, before the open pixel; the link goes straight to the page (not tracked).
  expect(html).toMatch(/Unsubscribe<\/a><\/p><img [^>]*\/><\/body><\/html>$/);
  const links = hrefs(html);
  expect(links.at(-1)).toEqual({ href: unsubscribeUrlOf(contactId), text: 'Unsubscribe' });
  expect(links[0]!.href).toContain('/t/c/');
  // The one-click headers are there as well.
  expect(raw).toMatch(/^List-Unsubscribe:\s+<http/im);
  expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r?$/im);

  // The link opens the confirmation page, which names the project; its form unsubscribes.
  const page = await env.http().get(appPath(links.at(-1)!.href));
  expect(page.status).toBe(200);
  expect(page.text).toContain('Stop sending email from <strong>Acme &amp; &quot;Sons&quot; &lt;News&gt;</strong>');
  const done = await env.http().post(appPath(links.at(-1)!.href)).type('form').send('');
  expect(done.status).toBe(200);
  expect(done.text).toContain('You are unsubscribed from Acme &amp; &quot;Sons&quot; &lt;News&gt;');
  const contact = await env.http().get(`/contacts/${contactId}`).set(auth());
  expect(contact.body.subscribed).toBe(false);
});

test('a body that links the unsubscribe or manage page gets no second link; a bare URL is no link', async () => {
  const own = await sendAndReceive('own-link@example.org', { template: await template('<p>Hi</p><a href="{{unsubscribeUrl}}">Opt out</a>') });
  expect(footerCount(own.html)).toBe(0);
  expect(hrefs(own.html)).toEqual([{ href: unsubscribeUrlOf(own.contactId), text: 'Opt out' }]);

  const manage = await sendAndReceive('manage-link@example.org', { template: await template("<a href='{{manageUrl}}'>Preferences</a>") });
  expect(footerCount(manage.html)).toBe(0);

  const markdown = await sendAndReceive('md-link@example.org', {
    template: await template('# News\n\n[Unsubscribe]({{unsubscribeUrl}})'),
    type: 'markdown',
  });
  expect(markdown.html).toContain('<h1>News</h1>');
  expect(footerCount(markdown.html)).toBe(0);

  const bare = await sendAndReceive('bare-url@example.org', { template: await template('<p>Leave: {{unsubscribeUrl}}</p>') });
  expect(footerCount(bare.html)).toBe(1);
});

test('transactional mail gets no footer', async () => {
  const fromTemplate = await sendAndReceive('receipt@example.org', { template: await template('<p>Your receipt</p>', 'TRANSACTIONAL') });
  expect(fromTemplate.html.trim()).toBe('<p>Your receipt</p>');
  const direct = await sendAndReceive('direct@example.org', { from: `billing@${DOMAIN}`, subject: 'S', body: '<p>Direct</p>' });
  expect(direct.html.trim()).toBe('<p>Direct</p>');
});

test("campaign emails and test copies get the footer, each with its recipient's link", async () => {
  // A project of its own: a campaign with no segment goes to every subscribed contact.
  const owner = await env.project('Campaign Co');
  const domain = 'footer-campaign.test';
  await sending.verifiedDomain(owner, domain);
  const ids: string[] = [];
  for (const email of ['cmp-a@example.org', 'cmp-b@example.org']) {
    const res = await env.http().post('/contacts').set(bearer(owner.secretKey)).send({ email, subscribed: true });
    expect(res.status).toBe(201);
    ids.push(res.body.id);
  }
  const campaign = await env
    .http()
    .post('/campaigns')
    .set(bearer(owner.secretKey))
    .send({ name: 'Launch', subject: 'Launch', body: '<p>We launched, {{email}}</p>', from: `news@${domain}` });
  expect(campaign.status).toBe(201);
  expect(campaign.body.type).toBe('MARKETING');

  const copy = await env.http().post(`/campaigns/${campaign.body.id}/test`).set(bearer(owner.secretKey)).send({ email: 'cmp-a@example.org' });
  expect(copy.status).toBe(202);
  const testCopy = await received('cmp-a@example.org');
  expect(testCopy.html).toContain('You are receiving this because you subscribed to Campaign Co.');
  smtp.clear();

  expect((await env.http().post(`/campaigns/${campaign.body.id}/send`).set(bearer(owner.secretKey)).send({})).status).toBe(200);
  for (const [i, email] of ['cmp-a@example.org', 'cmp-b@example.org'].entries()) {
    const { html } = await received(email);
    expect(html).toContain(`We launched, ${email}`);
    expect(footerCount(html)).toBe(1);
    expect(html).toContain('You are receiving this because you subscribed to Campaign Co.');
    expect(hrefs(html)).toEqual([{ href: unsubscribeUrlOf(ids[i]!), text: 'Unsubscribe' }]);
  }
});

test('a journey step sending a MARKETING template gets the footer', async () => {
  const tpl = await template('<p>Welcome aboard</p>');
  await buildJourney(env, project, {
    eventName: 'footer-joined',
    steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl } }],
    transitions: [['trigger', 'mail']],
  });
  const tracked = await env.http().post('/v1/track').set(auth()).send({ email: 'joiner@example.org', event: 'footer-joined', subscribed: true });
  expect(tracked.status).toBe(200);
  const { html } = await received('joiner@example.org');
  expect(html).toContain(FOOTER_TEXT);
  expect(hrefs(html)).toEqual([{ href: unsubscribeUrlOf(tracked.body.data.contact), text: 'Unsubscribe' }]);
});
