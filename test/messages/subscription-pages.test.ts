import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { signContactToken } from '../../mail/links';
import { bearer, type TestEnv } from '../helpers/env';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;

const DOMAIN = 'acme-pages.test';
// Served behind a path prefix (a reverse proxy strips it): the pages' forms and links must
// still lead back through the prefix.
const PUBLIC_URL = 'http://localhost:3000/mail';
// The pages name the project, escaped.
const PROJECT_NAME = 'Pages & <Co>';
const SHOWN_NAME = 'Pages &amp; &lt;Co&gt;';

/** The app's path for a public URL: what the proxy in front of it would forward. */
const appPath = (url: string) => {
  expect(url.startsWith(`${PUBLIC_URL}/`)).toBe(true);
  return url.slice(PUBLIC_URL.length);
};

interface Links {
  contactId: string;
  unsubscribeUrl: string;
  manageUrl: string;
  subscribeUrl: string;
  token: string;
}

/** Sends a mail whose body is the three links to `email` and reads them back from the received message. */
async function linksFor(email: string): Promise<Links> {
  const res = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: email, from: `hello@${DOMAIN}`, subject: 'Links', body: '{{unsubscribeUrl}} {{manageUrl}} {{subscribeUrl}}', subscribed: true });
  expect(res.status).toBe(200);
  const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes(email)));
  const parsed = await simpleParser(message.raw);
  const [unsubscribeUrl, manageUrl, subscribeUrl] = String(parsed.html).trim().split(' ');
  const token = unsubscribeUrl!.slice(`${PUBLIC_URL}/unsubscribe/`.length);
  expect(unsubscribeUrl).toBe(`${PUBLIC_URL}/unsubscribe/${token}`);
  expect(manageUrl).toBe(`${PUBLIC_URL}/manage/${token}`);
  expect(subscribeUrl).toBe(`${PUBLIC_URL}/subscribe/${token}`);
  return { contactId: res.body.data.emails[0].contact.id, unsubscribeUrl: unsubscribeUrl!, manageUrl: manageUrl!, subscribeUrl: subscribeUrl!, token };
}

/** Form actions and link targets of a page, resolved against the page's public URL. */
function targets(html: string, pageUrl: string) {
  const resolve = (href: string) => new URL(href.replace(/&amp;/g, '&'), pageUrl).toString();
  return {
    forms: [...html.matchAll(/<form method="post" action="([^"]*)">/g)].map((m) => resolve(m[1]!)),
    links: [...html.matchAll(/<a href="([^"]*)">/g)].map((m) => resolve(m[1]!)),
  };
}

const isSubscribed = async (id: string) => (await env.http().get(`/contacts/${id}`).set(bearer(project.secretKey))).body.subscribed as boolean;
const eventNames = async (id: string) =>
  ((await env.http().get(`/events/contact/${id}`).set(bearer(project.secretKey))).body.data as { name: string }[])
    .map((e) => e.name)
    .filter((n) => n.startsWith('contact.'));

beforeAll(async () => {
  sending = await startSendingEnv({ PUBLIC_URL });
  ({ env, smtp } = sending);
  project = await env.project(PROJECT_NAME);
  await sending.verifiedDomain(project, DOMAIN);
});

afterAll(() => sending.close());

test('unsubscribe (page, then RFC 8058 one-click POST), manage, and subscribe again', async () => {
  const links = await linksFor('reader@example.org');
  expect(await isSubscribed(links.contactId)).toBe(true);

  // GET only shows a confirmation form: link scanners that follow links unsubscribe nobody.
  const page = await env.http().get(appPath(links.unsubscribeUrl));
  expect(page.status).toBe(200);
  expect(page.headers['content-type']).toMatch(/^text\/html/);
  expect(page.text).toContain('reader@example.org');
  expect(page.text).toContain(`<h1>Unsubscribe from ${SHOWN_NAME}</h1>`);
  expect(page.text).not.toContain(PROJECT_NAME);
  expect(targets(page.text, links.unsubscribeUrl).forms).toEqual([links.unsubscribeUrl]);
  expect(await isSubscribed(links.contactId)).toBe(true);
  expect(await eventNames(links.contactId)).toEqual([]);

  const oneClick = await env
    .http()
    .post(appPath(links.unsubscribeUrl))
    .set('Content-Type', 'application/x-www-form-urlencoded')
    .send('List-Unsubscribe=One-Click');
  expect(oneClick.status).toBe(200);
  expect(oneClick.headers['content-type']).toMatch(/^text\/html/);
  expect(oneClick.text).toContain(`<h1>You are unsubscribed from ${SHOWN_NAME}</h1>`);
  expect(targets(oneClick.text, links.unsubscribeUrl).links).toEqual([links.manageUrl]);
  expect(await isSubscribed(links.contactId)).toBe(false);
  expect(await eventNames(links.contactId)).toEqual(['contact.unsubscribed']);

  // A repeat (a mail client retrying) changes nothing and emits nothing.
  const again = await env.http().post(appPath(links.unsubscribeUrl)).type('form').send('List-Unsubscribe=One-Click');
  expect(again.status).toBe(200);
  expect(await eventNames(links.contactId)).toEqual(['contact.unsubscribed']);

  const manage = await env.http().get(appPath(links.manageUrl));
  expect(manage.status).toBe(200);
  expect(manage.text).toContain(`<strong>unsubscribed</strong> to email from <strong>${SHOWN_NAME}</strong>`);
  expect(manage.text).toContain('Subscribe again');
  expect(targets(manage.text, links.manageUrl).forms).toEqual([links.subscribeUrl]);

  const confirm = await env.http().get(appPath(links.subscribeUrl));
  expect(confirm.status).toBe(200);
  expect(confirm.text).toContain(`<h1>Subscribe to ${SHOWN_NAME}</h1>`);
  expect(targets(confirm.text, links.subscribeUrl).forms).toEqual([links.subscribeUrl]);
  expect(await isSubscribed(links.contactId)).toBe(false);

  const subscribe = await env.http().post(appPath(links.subscribeUrl)).type('form').send('');
  expect(subscribe.status).toBe(200);
  expect(subscribe.text).toContain(`<h1>You are subscribed to ${SHOWN_NAME}</h1>`);
  expect(await isSubscribed(links.contactId)).toBe(true);
  expect(await eventNames(links.contactId)).toEqual(['contact.subscribed', 'contact.unsubscribed']);

  const managed = await env.http().get(appPath(links.manageUrl));
  expect(managed.text).toContain('<strong>subscribed</strong>');
  expect(targets(managed.text, links.manageUrl).forms).toEqual([links.unsubscribeUrl]);
});

test('marketing mail carries the one-click List-Unsubscribe headers, and the header URL works', async () => {
  const template = await env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({ name: 'News', subject: 'News', body: 'Read on', from: `news@${DOMAIN}`, type: 'MARKETING' });
  expect(template.status).toBe(201);
  const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to: 'news-reader@example.org', template: template.body.id, subscribed: true });
  expect(res.status).toBe(200);
  const contactId = res.body.data.emails[0].contact.id as string;
  const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes('news-reader@example.org')));
  const parsed = await simpleParser(message.raw);
  const headerLine = (key: string) =>
    parsed.headerLines
      .find((h) => h.key === key)
      ?.line.replace(/\r?\n[ \t]+/g, ' ')
      .replace(/^[^:]+:\s*/, '');
  expect(headerLine('list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
  const url = /^<([^>]+)>$/.exec(headerLine('list-unsubscribe') ?? '')?.[1] ?? '';
  expect(url).toBe(`${PUBLIC_URL}/unsubscribe/${signContactToken(env.deps.linkSecret, contactId)}`);

  const oneClick = await env.http().post(appPath(url)).type('form').send('List-Unsubscribe=One-Click');
  expect(oneClick.status).toBe(200);
  expect(await isSubscribed(contactId)).toBe(false);
  expect(await eventNames(contactId)).toEqual(['contact.unsubscribed']);
});

test('a tampered, foreign or unknown token is a 404 page and changes nothing', async () => {
  const a = await linksFor('alice@example.org');
  const b = await linksFor('bob@example.org');
  expect(a.token).not.toBe(b.token);
  const [aId, aSig] = a.token.split('.') as [string, string];
  const [bId, bSig] = b.token.split('.') as [string, string];
  expect(aSig).not.toBe(bSig);

  const flip = (s: string, i: number) => `${s.slice(0, i)}${s[i] === 'A' ? 'B' : 'A'}${s.slice(i + 1)}`;
  const deleted = await linksFor('gone@example.org');
  expect((await env.http().delete(`/contacts/${deleted.contactId}`).set(bearer(project.secretKey))).body).toEqual({ id: deleted.contactId, deleted: true });

  const bad = [
    `${aId}.${flip(aSig, 5)}`, // one character of the signature changed
    `${aId}.${flip(aSig, aSig.length - 1)}`,
    `${bId}.${aSig}`, // another contact's id with A's signature
    `${aId}.${bSig}`,
    `${aId}.${signContactToken('some other secret', a.contactId).split('.')[1]}`, // signed elsewhere
    `${a.token}.extra`,
    `${aId.slice(0, 4)}!${aId.slice(4)}.${aSig}`, // junk in the id part
    `${aId}.`,
    aId,
    'not-a-token',
    deleted.token, // valid signature, contact gone
  ];
  for (const token of bad) {
    for (const [method, path] of [
      ['get', 'unsubscribe'],
      ['post', 'unsubscribe'],
      ['get', 'manage'],
      ['get', 'subscribe'],
      ['post', 'subscribe'],
    ] as const) {
      const res = await env.http()[method](`/${path}/${encodeURIComponent(token)}`).type('form').send('List-Unsubscribe=One-Click');
      expect({ token, method, path, status: res.status }).toEqual({ token, method, path, status: 404 });
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.text).toContain('Link not valid');
    }
  }
  expect(await isSubscribed(a.contactId)).toBe(true);
  expect(await isSubscribed(b.contactId)).toBe(true);
  expect(await eventNames(a.contactId)).toEqual([]);
  expect(await eventNames(b.contactId)).toEqual([]);

  // The genuine tokens still work, each for its own contact only.
  const ok = await env.http().post(appPath(b.unsubscribeUrl)).type('form').send('List-Unsubscribe=One-Click');
  expect(ok.status).toBe(200);
  expect(ok.text).toContain('bob@example.org');
  expect(await isSubscribed(b.contactId)).toBe(false);
  expect(await isSubscribed(a.contactId)).toBe(true);
});
