import { randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { addTracking, signClickToken, signOpenToken, TRANSPARENT_GIF, verifyClickToken, verifyOpenToken } from '../../mail/tracking';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';
import { type EventItem, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;
let marketingTemplate: string;

const DOMAIN = 'acme-track.test';
// Behind a path prefix, as in production behind a proxy: tracked URLs must lead back through it.
const PUBLIC_URL = 'http://localhost:3000/mail';

/** Timestamps as PostgreSQL prints them (the driver here returns them as text). */
interface EmailRow {
  status: string;
  sent_at: string | null;
  opened_at: string | null;
  open_count: number;
  clicked_at: string | null;
  click_count: number;
  clicked_after_open: boolean | null;
}

const emailRow = async (id: string) =>
  (await queryOne<EmailRow>(
    env.orm.em.fork(),
    `select status, sent_at, opened_at, open_count, clicked_at, click_count, clicked_at >= opened_at as clicked_after_open
     from emails where id = ?`,
    [id],
  ))!;

const emailEvents = async (contactId: string) =>
  ((await env.http().get(`/events/contact/${contactId}`).set(bearer(project.secretKey))).body.data as EventItem[])
    .filter((e) => e.name.startsWith('email.') && e.name !== 'email.sent')
    .map((e) => ({ name: e.name, data: e.data }))
    .reverse();

/** The app's path for one of our public URLs (what the proxy forwards). */
const appPath = (url: string) => {
  expect(url.startsWith(`${PUBLIC_URL}/`)).toBe(true);
  return url.slice(PUBLIC_URL.length);
};

const hrefs = (html: string) =>
  [...html.matchAll(/<a\b(?:[^>"']|"[^"]*"|'[^']*')*?\shref="([^"]*)"(?:[^>"']|"[^"]*"|'[^']*')*>([^<]*)<\/a>/g)].map((m) => ({
    href: m[1]!,
    text: m[2]!,
  }));
const pixelOf = (html: string) => /<img src="([^"]+)" width="1" height="1" alt=""[^>]*\/><\/body>/.exec(html)?.[1];

/** Sends through /v1/send and returns the ids and the HTML that arrived. */
async function sendAndReceive(to: string, body: Record<string, unknown>) {
  const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, subscribed: true, ...body });
  expect(res.status).toBe(200);
  const emailId = res.body.data.emails[0].email as string;
  const contactId = res.body.data.emails[0].contact.id as string;
  const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes(to)));
  const html = String((await simpleParser(message.raw)).html).trim();
  await waitUntil(async () => (await emailRow(emailId)).status === 'SENT');
  return { emailId, contactId, html };
}

beforeAll(async () => {
  sending = await startSendingEnv({ PUBLIC_URL });
  ({ env, smtp } = sending);
  project = await env.project('tracking project');
  await sending.verifiedDomain(project, DOMAIN);
  const template = await env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({
      name: 'Newsletter',
      subject: 'News for {{email}}',
      body:
        '<html><body><p>Hello {{name ?? "reader"}}</p>' +
        '<a href="https://shop.example.com/pricing?plan=pro&ref={{ref}}">Pricing</a> ' +
        "<a class='x' href='http://example.org/blog#latest' title=\"a > b\">Blog</a> " +
        '<a href="mailto:help@example.org">Write to us</a> ' +
        '<a href="{{unsubscribeUrl}}">Unsubscribe</a></body></html>',
      from: `news@${DOMAIN}`,
      type: 'MARKETING',
    });
  expect(template.status).toBe(201);
  marketingTemplate = template.body.id;
});

afterAll(() => sending.close());

test('marketing mail: the pixel and each tracked link, fetched over HTTP, update the email and record events', async () => {
  const { emailId, contactId, html } = await sendAndReceive('reader@example.org', {
    template: marketingTemplate,
    // Handlebars writes "=" as "&#x3D;" in the href; the redirect must go to the decoded URL.
    data: { ref: 'news=1' },
  });

  const links = hrefs(html);
  expect(links.map((l) => l.text)).toEqual(['Pricing', 'Blog', 'Write to us', 'Unsubscribe']);
  const [pricing, blog, mailto, unsubscribe] = links as [(typeof links)[0], (typeof links)[0], (typeof links)[0], (typeof links)[0]];
  expect(pricing.href).toMatch(new RegExp(`^${PUBLIC_URL}/t/c/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]{22}$`));
  expect(blog.href).toMatch(new RegExp(`^${PUBLIC_URL}/t/c/`));
  expect(html).toContain(`title="a > b"`); // the rest of the tag is kept
  // Left alone: other schemes and the subscription pages (List-Unsubscribe must stay usable).
  expect(mailto.href).toBe('mailto:help@example.org');
  expect(unsubscribe.href).toMatch(new RegExp(`^${PUBLIC_URL}/unsubscribe/`));
  const pixel = pixelOf(html);
  expect(pixel).toMatch(new RegExp(`^${PUBLIC_URL}/t/o/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]{22}$`));

  let row = await emailRow(emailId);
  expect(row).toMatchObject({ status: 'SENT', opened_at: null, open_count: 0, clicked_at: null, click_count: 0 });

  // The pixel: a 43-byte transparent GIF that no cache keeps.
  const open = await env.http().get(appPath(pixel!)).buffer(true);
  expect(open.status).toBe(200);
  expect(open.headers['content-type']).toBe('image/gif');
  expect(open.headers['cache-control']).toMatch(/no-store/);
  expect(Buffer.compare(open.body as Buffer, TRANSPARENT_GIF)).toBe(0);
  expect(TRANSPARENT_GIF.length).toBe(43);
  row = await emailRow(emailId);
  expect(row).toMatchObject({ status: 'OPENED', open_count: 1, click_count: 0 });
  const firstOpen = row.opened_at!;
  expect(firstOpen).toEqual(expect.any(String));

  await env.http().get(appPath(pixel!)).expect(200);
  row = await emailRow(emailId);
  expect(row).toMatchObject({ status: 'OPENED', open_count: 2, opened_at: firstOpen });

  // A click: 302 to exactly the URL of the template, decoded.
  const click = await env.http().get(appPath(pricing.href)).redirects(0);
  expect(click.status).toBe(302);
  expect(click.headers.location).toBe('https://shop.example.com/pricing?plan=pro&ref=news=1');
  row = await emailRow(emailId);
  expect(row).toMatchObject({ status: 'CLICKED', open_count: 2, click_count: 1, opened_at: firstOpen });
  const firstClick = row.clicked_at!;
  expect(row.clicked_after_open).toBe(true);

  expect((await env.http().get(appPath(pricing.href)).redirects(0)).headers.location).toBe(
    'https://shop.example.com/pricing?plan=pro&ref=news=1',
  );
  const second = await env.http().get(appPath(blog.href)).redirects(0);
  expect(second.status).toBe(302);
  expect(second.headers.location).toBe('http://example.org/blog#latest');
  // A later open never moves the status back from CLICKED.
  await env.http().get(appPath(pixel!)).expect(200);
  row = await emailRow(emailId);
  expect(row).toMatchObject({ status: 'CLICKED', open_count: 3, click_count: 3, opened_at: firstOpen, clicked_at: firstClick });

  // HEAD (link checkers) is answered but not counted.
  expect((await env.http().head(appPath(pricing.href)).redirects(0)).status).toBe(302);
  expect((await env.http().head(appPath(pixel!))).status).toBe(200);
  expect(await emailRow(emailId)).toMatchObject({ open_count: 3, click_count: 3 });

  // One event per fact: the first open, the first click of each link.
  expect(await emailEvents(contactId)).toEqual([
    { name: 'email.opened', data: { emailId } },
    { name: 'email.clicked', data: { emailId, url: 'https://shop.example.com/pricing?plan=pro&ref=news=1' } },
    { name: 'email.clicked', data: { emailId, url: 'http://example.org/blog#latest' } },
  ]);
});

test('a click on a mail whose pixel was blocked counts as its first open', async () => {
  const { emailId, contactId, html } = await sendAndReceive('no-images@example.org', { template: marketingTemplate });
  const click = await env.http().get(appPath(hrefs(html)[1]!.href)).redirects(0);
  expect(click.headers.location).toBe('http://example.org/blog#latest');
  const row = await emailRow(emailId);
  expect(row).toMatchObject({ status: 'CLICKED', open_count: 1, click_count: 1 });
  expect(row.opened_at).toEqual(row.clicked_at);
  expect(await emailEvents(contactId)).toEqual([
    { name: 'email.opened', data: { emailId, viaClick: true } },
    { name: 'email.clicked', data: { emailId, url: 'http://example.org/blog#latest' } },
  ]);
});

test('tampered, foreign and re-pointed tokens: clicks are 404, the pixel still answers, nothing is recorded', async () => {
  const { emailId, contactId, html } = await sendAndReceive('careful@example.org', { template: marketingTemplate });
  const clickToken = hrefs(html)[0]!.href.split('/t/c/')[1]!;
  const openToken = pixelOf(html)!.split('/t/o/')[1]!;
  const [payload, mac] = clickToken.split('.') as [string, string];
  const flip = (s: string, i: number) => `${s.slice(0, i)}${s[i] === 'A' ? 'B' : 'A'}${s.slice(i + 1)}`;
  // Same signature, another target: the id bytes kept, the URL swapped for an attacker's.
  const repointed = Buffer.concat([Buffer.from(payload, 'base64url').subarray(0, 16), Buffer.from('https://evil.example/phish')]);

  const badClicks = [
    `${payload}.${flip(mac, 3)}`,
    `${flip(payload, 2)}.${mac}`,
    `${repointed.toString('base64url')}.${mac}`,
    signClickToken('another instance secret', emailId, 'https://shop.example.com/'),
    `${payload}.${mac}.x`,
    `${payload}!.${mac}`,
    payload,
    openToken, // an open token is not a click token
    'nothing',
  ];
  for (const token of badClicks) {
    const res = await env.http().get(`/t/c/${encodeURIComponent(token)}`).redirects(0);
    expect({ token, status: res.status, location: res.headers.location }).toEqual({ token, status: 404, location: undefined });
  }
  for (const token of [flip(openToken, 30), signOpenToken('another instance secret', emailId), clickToken, 'x']) {
    const res = await env.http().get(`/t/o/${encodeURIComponent(token)}`).buffer(true);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('image/gif');
  }
  // A genuine token for an email that does not exist redirects (the URL was signed) and records nothing.
  const stranger = await env.http().get(`/t/c/${signClickToken(env.deps.linkSecret, randomUUID(), 'https://example.net/x')}`).redirects(0);
  expect(stranger.status).toBe(302);
  expect(stranger.headers.location).toBe('https://example.net/x');

  expect(await emailRow(emailId)).toMatchObject({ status: 'SENT', open_count: 0, click_count: 0, opened_at: null });
  expect(await emailEvents(contactId)).toEqual([]);
  // The genuine ones still work.
  expect((await env.http().get(`/t/c/${clickToken}`).redirects(0)).status).toBe(302);
});

test('transactional mail is not tracked unless asked; `tracking` turns it on or off per send', async () => {
  const body = '<p>Your receipt</p><a href="https://example.com/receipt/1">View</a>';
  const plain = await sendAndReceive('buyer@example.org', { from: `billing@${DOMAIN}`, subject: 'Receipt', body });
  expect(plain.html).toBe(body);

  const tracked = await sendAndReceive('buyer2@example.org', { from: `billing@${DOMAIN}`, subject: 'Receipt', body, tracking: true });
  expect(hrefs(tracked.html)[0]!.href).toMatch(new RegExp(`^${PUBLIC_URL}/t/c/`));
  // No </body>: the pixel goes at the end.
  expect(tracked.html).toMatch(new RegExp(`</a><img src="${PUBLIC_URL}/t/o/[^"]+" width="1" height="1" alt="" [^>]*/>$`));
  await env.http().get(appPath(/<img src="([^"]+)"/.exec(tracked.html)![1]!)).expect(200);
  expect(await emailRow(tracked.emailId)).toMatchObject({ status: 'OPENED', open_count: 1 });

  const optedOut = await sendAndReceive('reader2@example.org', { template: marketingTemplate, tracking: false });
  expect(optedOut.html).not.toContain('/t/');
  expect(hrefs(optedOut.html)[0]!.href).toBe('https://shop.example.com/pricing?plan=pro&ref=');
});

test('a workflow email from a MARKETING template is tracked too', async () => {
  const auth = bearer(project.secretKey);
  await buildJourney(env, project, {
    eventName: 'joined',
    steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: marketingTemplate } }],
    transitions: [['trigger', 'mail']],
  });

  await env.http().post('/v1/track').set(auth).send({ email: 'joiner@example.org', event: 'joined' }).expect(200);
  const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes('joiner@example.org')));
  const html = String((await simpleParser(message.raw)).html).trim();
  const [row] = await query<{ id: string }>(env.orm.em.fork(), "select id from emails where project_id = ? and to_email = 'joiner@example.org'", [
    project.id,
  ]);
  // The links carry the id of the row that was written.
  const token = hrefs(html)[0]!.href.split('/t/c/')[1]!;
  expect(verifyClickToken(env.deps.linkSecret, token)).toEqual({ emailId: row!.id, url: 'https://shop.example.com/pricing?plan=pro&ref=' });
  expect(verifyOpenToken(env.deps.linkSecret, pixelOf(html)!.split('/t/o/')[1]!)).toBe(row!.id);
});

describe('addTracking (the rewriting itself)', () => {
  const opts = { publicUrl: 'https://t.example', linkSecret: 's3cret', emailId: '6f1c2a4e-8d3b-4c5a-9e7f-0123456789ab' };
  const targetOf = (url: string) => verifyClickToken(opts.linkSecret, url.slice('https://t.example/t/c/'.length))?.url;

  test('quoting styles, upper case, attribute order and entities', () => {
    const out = addTracking(
      '<A TITLE="x" HREF=https://a.example/x?y=1>a</A><a data-x=\'>\' href = "https://b.example/?a=1&amp;b=&#x3D;2">b</a>' +
        '<a href="#top">top</a><a href="tel:+100">tel</a><a name="n">anchor</a><a href="https://t.example/manage/tok">m</a>',
      opts,
    );
    const found = [...out.matchAll(/href\s*=\s*"([^"]*)"/gi)].map((m) => m[1]!);
    expect(targetOf(found[0]!)).toBe('https://a.example/x?y=1');
    expect(targetOf(found[1]!)).toBe('https://b.example/?a=1&b==2');
    expect(found.slice(2)).toEqual(['#top', 'tel:+100', 'https://t.example/manage/tok']);
    expect(out).toContain('<A TITLE="x" HREF="https://t.example/t/c/');
    expect(out).toContain(`<a data-x='>' href = "https://t.example/t/c/`);
    expect(out).toContain('<a name="n">anchor</a>');
  });

  test('the pixel goes before the last </body>, or at the end', () => {
    const withBody = addTracking('<html><BODY>x</BODY></html>', opts);
    expect(withBody).toMatch(/^<html><BODY>x<img src="https:\/\/t\.example\/t\/o\/[^"]+" [^>]*\/><\/BODY><\/html>$/);
    expect(addTracking('plain', opts)).toMatch(/^plain<img src=/);
    const src = /<img src="([^"]+)"/.exec(withBody)![1]!;
    expect(verifyOpenToken(opts.linkSecret, src.slice('https://t.example/t/o/'.length))).toBe(opts.emailId);
  });
});
