import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, type TestEnv } from '../helpers/env';
import { type EventItem, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

const DOMAIN = 'acme-events.test';

interface Page {
  data: EventItem[];
  cursor: string | null;
  hasMore: boolean;
  total: number;
}

const track = async (p: ProjectWithKeys, email: string, event: string, data?: object) => {
  const res = await env.http().post('/v1/track').set(bearer(p.secretKey)).send({ email, event, data });
  expect(res.status).toBe(200);
  return res.body.data as { contact: string; event: string; timestamp: string };
};

const get = async (p: ProjectWithKeys, path: string, query: Record<string, string | number> = {}) =>
  env.http().get(path).query(query).set(bearer(p.secretKey));

/** Follows the cursor to the end, checking `total` is only on the first page. */
async function allPages(p: ProjectWithKeys, path: string, query: Record<string, string | number>) {
  const pages: Page[] = [];
  let cursor: string | undefined;
  do {
    const res = await get(p, path, { ...query, ...(cursor ? { cursor } : {}) });
    expect(res.status).toBe(200);
    pages.push(res.body);
    cursor = res.body.cursor ?? undefined;
    expect(res.body.hasMore).toBe(cursor !== undefined);
  } while (cursor);
  return pages;
}

// Tracked once, in order, by the first test; the others read them.
let tracked: { name: string; email: string; id: string; contact: string }[] = [];

beforeAll(async () => {
  sending = await startSendingEnv();
  ({ env, smtp } = sending);
  project = await env.project('events project');
  other = await env.project('events other project');
});

afterAll(() => sending.close());

test('GET /events: newest first, cursor pages, total on the first page only, name filter', async () => {
  const plan: [string, string][] = [
    ['viewed', 'ann@example.org'],
    ['clicked', 'bob@example.org'],
    ['viewed', 'ann@example.org'],
    ['viewed', 'bob@example.org'],
    ['clicked', 'ann@example.org'],
    ['viewed', 'ann@example.org'],
    ['purchased', 'ann@example.org'],
  ];
  tracked = [];
  for (const [i, [name, email]] of plan.entries()) {
    const t = await track(project, email, name, { step: i });
    tracked.push({ name, email, id: t.event, contact: t.contact });
  }
  // Another project's events never show up here.
  await track(other, 'ann@example.org', 'viewed', { step: 99 });

  const newestFirst = [...tracked].reverse();
  const pages = await allPages(project, '/events', { limit: 3 });
  expect(pages.map((p) => p.data.length)).toEqual([3, 3, 1]);
  expect(pages.map((p) => p.total)).toEqual([7, 0, 0]);
  expect(pages.map((p) => p.hasMore)).toEqual([true, true, false]);
  const items = pages.flatMap((p) => p.data);
  expect(items.map((e) => e.id)).toEqual(newestFirst.map((t) => t.id));
  expect(items.map((e) => e.name)).toEqual(newestFirst.map((t) => t.name));
  expect(items.map((e) => e.email)).toEqual(newestFirst.map((t) => t.email));
  expect(items.map((e) => e.data)).toEqual(newestFirst.map((_, i) => ({ step: tracked.length - 1 - i })));
  expect(items.map((e) => e.contactId)).toEqual(newestFirst.map((t) => t.contact));
  const times = items.map((e) => Date.parse(e.createdAt));
  expect([...times].sort((a, b) => b - a)).toEqual(times);

  // Default page size is 20: one page with everything.
  const single = await get(project, '/events');
  expect(single.body).toMatchObject({ total: 7, hasMore: false, cursor: null });
  expect(single.body.data).toHaveLength(7);

  const viewed = await allPages(project, '/events', { name: 'viewed', limit: 2 });
  expect(viewed.map((p) => p.total)).toEqual([4, 0]);
  expect(viewed.flatMap((p) => p.data.map((e) => e.id))).toEqual(newestFirst.filter((t) => t.name === 'viewed').map((t) => t.id));
  const none = await get(project, '/events', { name: 'never-tracked' });
  expect(none.body).toEqual({ data: [], cursor: null, hasMore: false, total: 0 });

  const tooMany = await get(project, '/events', { limit: 101 });
  expect(tooMany.status).toBe(422);
  expect(tooMany.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['query.limit']);
  const badCursor = await get(project, '/events', { cursor: 'not-a-cursor' });
  expect(badCursor.status).toBe(400);
  expect(badCursor.body.error.code).toBe('INVALID_CURSOR');

  const publicKey = await env.http().get('/events').set(bearer(project.publicKey));
  expect(publicKey.status).toBe(401);
});

test('GET /events/contact/:contactId: only that contact, 404 for unknown or foreign contacts', async () => {
  const ann = tracked.find((t) => t.email === 'ann@example.org')!.contact;
  const annEvents = [...tracked].reverse().filter((t) => t.email === 'ann@example.org');
  const pages = await allPages(project, `/events/contact/${ann}`, { limit: 2 });
  expect(pages.map((p) => p.total)).toEqual([5, 0, 0]);
  const items = pages.flatMap((p) => p.data);
  expect(items.map((e) => e.id)).toEqual(annEvents.map((t) => t.id));
  expect(new Set(items.map((e) => e.contactId))).toEqual(new Set([ann]));

  const unknown = await get(project, '/events/contact/cnt_00000000000000000000000000000000');
  expect(unknown.status).toBe(404);
  expect(unknown.body.error.code).toBe('CONTACT_NOT_FOUND');

  // The other project's Ann is another contact; neither project reaches the other's.
  const otherAnn = (await get(other, '/events')).body.data[0].contactId as string;
  expect(otherAnn).not.toBe(ann);
  const foreign = await get(project, `/events/contact/${otherAnn}`);
  expect(foreign.status).toBe(404);
  expect(foreign.body.error.code).toBe('CONTACT_NOT_FOUND');
  const reverse = await get(other, `/events/contact/${ann}`);
  expect(reverse.status).toBe(404);
  const own = await get(other, `/events/contact/${otherAnn}`);
  expect(own.body.data.map((e: EventItem) => e.data)).toEqual([{ step: 99 }]);
});

test('GET /events/names: exact counts and last occurrence, per project', async () => {
  const all = (await get(project, '/events', { limit: 100 })).body.data as EventItem[];
  const lastSeen = (name: string) => all.find((e) => e.name === name)!.createdAt;
  const res = await get(project, '/events/names');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    names: [
      { name: 'clicked', count: 2, lastSeenAt: lastSeen('clicked') },
      { name: 'purchased', count: 1, lastSeenAt: lastSeen('purchased') },
      { name: 'viewed', count: 4, lastSeenAt: lastSeen('viewed') },
    ],
  });
  const theirs = await get(other, '/events/names');
  expect(theirs.body.names).toHaveLength(1);
  expect(theirs.body.names[0]).toMatchObject({ name: 'viewed', count: 1 });
  const fresh = await env.project('events empty project');
  expect((await get(fresh, '/events/names')).body).toEqual({ names: [] });
  expect((await get(fresh, '/events')).body).toEqual({ data: [], cursor: null, hasMore: false, total: 0 });
});

test('/v1/send: an explicit subscription change emits contact.* events; omitted leaves a new contact unsubscribed', async () => {
  await sending.verifiedDomain(project, DOMAIN);
  const send = async (to: string, extra: object = {}) => {
    const res = await env
      .http()
      .post('/v1/send')
      .set(bearer(project.secretKey))
      .send({ to, from: `hello@${DOMAIN}`, subject: 'Hi', body: 'Hello', ...extra });
    expect(res.status).toBe(200);
    return res.body.data.emails[0] as { contact: { id: string }; email: string };
  };
  /** Names of a contact's events, newest first, once its emails were all recorded as sent. */
  const namesOnceSent = async (contactId: string, sent: number) =>
    waitUntil(async () => {
      const names = (await get(project, `/events/contact/${contactId}`)).body.data.map((e: EventItem) => e.name) as string[];
      return names.filter((n) => n === 'email.sent').length === sent && names;
    });

  const created = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'lapsed@example.org', subscribed: false });
  expect(created.status).toBe(201);
  const lapsed = created.body.id as string;

  const resubscribe = await send('lapsed@example.org', { subscribed: true });
  expect(resubscribe.contact.id).toBe(lapsed);
  expect((await get(project, `/contacts/${lapsed}`)).body.subscribed).toBe(true);
  expect(await namesOnceSent(lapsed, 1)).toEqual(['email.sent', 'contact.subscribed']);

  // Omitted keeps the state and emits nothing; the same value again emits nothing either.
  await send('lapsed@example.org');
  await send('lapsed@example.org', { subscribed: true });
  expect(await namesOnceSent(lapsed, 3)).toEqual(['email.sent', 'email.sent', 'email.sent', 'contact.subscribed']);
  await send('lapsed@example.org', { subscribed: false });
  expect((await get(project, `/contacts/${lapsed}`)).body.subscribed).toBe(false);
  expect((await namesOnceSent(lapsed, 4)).slice(0, 2)).toEqual(['email.sent', 'contact.unsubscribed']);

  const fresh = await send('brand-new@example.org');
  const contact = (await get(project, `/contacts/${fresh.contact.id}`)).body;
  expect(contact.email).toBe('brand-new@example.org');
  expect(contact.subscribed).toBe(false);
  expect(await namesOnceSent(fresh.contact.id, 1)).toEqual(['email.sent']);
  const sentEvent = (await get(project, `/events/contact/${fresh.contact.id}`)).body.data[0] as EventItem;
  expect(sentEvent.data).toEqual({ emailId: fresh.email });

  // A new contact with an explicit true is subscribed, without a change event (nothing changed).
  const opted = await send('opted-in@example.org', { subscribed: true });
  expect((await get(project, `/contacts/${opted.contact.id}`)).body.subscribed).toBe(true);
  expect(await namesOnceSent(opted.contact.id, 1)).toEqual(['email.sent']);
  await smtp.waitFor(6);
});
