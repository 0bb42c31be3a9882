import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import type { EventItem } from '../helpers/sending';

let env: TestEnv;
let project: ProjectWithKeys;

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('track project');
});

afterAll(async () => {
  await env.close();
});

const track = (key: string, body: object, path = '/v1/track') => env.http().post(path).set(bearer(key)).send(body);
const contactOf = async (id: string) => (await env.http().get(`/contacts/${id}`).set(bearer(project.secretKey))).body;

/** Every event of the project with that name, newest first (first page of 100 is plenty here). */
async function eventsNamed(name: string, p: ProjectWithKeys = project): Promise<EventItem[]> {
  const res = await env.http().get('/events').query({ name, limit: 100 }).set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  return res.body.data;
}

const fieldsOf = (res: { body: { error: { errors: { field: string }[] } } }) => res.body.error.errors.map((e) => e.field);

test('public and secret keys track: the envelope, a new subscribed contact, data patched, one-shot values stored nowhere', async () => {
  const first = await track(project.publicKey, {
    email: 'Track.One@Example.org',
    event: 'signed-up',
    data: { plan: 'pro', company: 'Acme', code: { value: 'X-1', persistent: false } },
  });
  expect(first.status).toBe(200);
  expect(Object.keys(first.body).sort()).toEqual(['data', 'success']);
  expect(first.body.success).toBe(true);
  expect(Object.keys(first.body.data).sort()).toEqual(['contact', 'event', 'timestamp']);
  const { contact: contactId, event: eventId, timestamp } = first.body.data;
  expect(contactId).toMatch(/^cnt_[0-9a-f]+$/);
  expect(eventId).toMatch(/^evt_[0-9a-f]+$/);
  expect(new Date(timestamp).toISOString()).toBe(timestamp);

  const created = await contactOf(contactId);
  expect(created.email).toBe('track.one@example.org');
  expect(created.subscribed).toBe(true);
  expect(created.data).toEqual({ plan: 'pro', company: 'Acme' });

  const [stored] = await eventsNamed('signed-up');
  expect(stored).toEqual({
    id: eventId,
    name: 'signed-up',
    contactId,
    email: 'track.one@example.org',
    data: { plan: 'pro', company: 'Acme' },
    createdAt: timestamp,
  });

  // Secret key, same contact: patch semantics ("" ignored, null removes, other keys kept).
  const second = await track(project.secretKey, {
    email: 'track.one@example.org',
    event: 'upgraded',
    data: { plan: 'team', company: '', seats: 3, email: 'evil@example.org', unsubscribeUrl: 'x' },
  });
  expect(second.status).toBe(200);
  expect(second.body.data.contact).toBe(contactId);
  expect(second.body.data.event).not.toBe(eventId);
  expect((await contactOf(contactId)).data).toEqual({ plan: 'team', company: 'Acme', seats: 3 });
  const [upgraded] = await eventsNamed('upgraded');
  expect(upgraded!.data).toEqual({ plan: 'team', seats: 3 });

  const third = await track(project.secretKey, { email: 'track.one@example.org', event: 'left-company', data: { company: null } });
  expect(third.status).toBe(200);
  const after = await contactOf(contactId);
  expect(after.data).toEqual({ plan: 'team', seats: 3 });
  expect(after.email).toBe('track.one@example.org');
  // No explicit subscription value anywhere: the state stayed, and no contact.* event was emitted.
  expect(after.subscribed).toBe(true);
  const events = await env.http().get(`/events/contact/${contactId}`).set(bearer(project.secretKey));
  expect(events.body.data.map((e: EventItem) => e.name)).toEqual(['left-company', 'upgraded', 'signed-up']);
});

test('subscribed: false is respected for a new contact, omitted keeps the state, an explicit change emits contact.* events', async () => {
  const created = await track(project.publicKey, { email: 'quiet@example.org', event: 'visited', subscribed: false });
  expect(created.status).toBe(200);
  const id = created.body.data.contact;
  expect((await contactOf(id)).subscribed).toBe(false);

  const omitted = await track(project.publicKey, { email: 'quiet@example.org', event: 'visited' });
  expect(omitted.body.data.contact).toBe(id);
  expect((await contactOf(id)).subscribed).toBe(false);

  const sub = await track(project.publicKey, { email: 'quiet@example.org', event: 'opted-in', subscribed: true });
  expect(sub.status).toBe(200);
  expect((await contactOf(id)).subscribed).toBe(true);
  // Same value again: no change, no event.
  await track(project.secretKey, { email: 'quiet@example.org', event: 'opted-in', subscribed: true });
  const unsub = await track(project.secretKey, { email: 'quiet@example.org', event: 'opted-out', subscribed: false });
  expect(unsub.status).toBe(200);
  expect((await contactOf(id)).subscribed).toBe(false);

  const subscribedEvents = (await eventsNamed('contact.subscribed')).filter((e) => e.contactId === id);
  const unsubscribedEvents = (await eventsNamed('contact.unsubscribed')).filter((e) => e.contactId === id);
  expect(subscribedEvents).toHaveLength(1);
  expect(unsubscribedEvents).toHaveLength(1);
  const history = await env.http().get(`/events/contact/${id}`).set(bearer(project.secretKey));
  const names = history.body.data.map((e: EventItem) => e.name) as string[];
  // Newest first across requests. Within one request the contact.* event and the tracked one
  // may share a millisecond, and ids order only by millisecond: no order asserted between them.
  expect(names.filter((n) => !n.startsWith('contact.'))).toEqual(['opted-out', 'opted-in', 'opted-in', 'visited', 'visited']);
  expect(names.slice(0, 2).sort()).toEqual(['contact.unsubscribed', 'opted-out']);
  expect(names.slice(2, 5).filter((n) => n.startsWith('contact.'))).toEqual(['contact.subscribed']);
  expect(history.body.total).toBe(7);
});

test('reserved event names, invalid emails and bad auth are refused and record nothing', async () => {
  const before = (await env.http().get('/events').set(bearer(project.secretKey))).body.total as number;

  for (const event of ['email.sent', 'contact.x', 'segment.a.entry']) {
    const res = await track(project.publicKey, { email: 'reserved@example.org', event });
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(fieldsOf(res)).toEqual(['event']);
    expect(res.body.message).toBe(res.body.error.message);
  }
  const badEmail = await track(project.secretKey, { email: 'not-an-email', event: 'ok' });
  expect(badEmail.status).toBe(422);
  expect(fieldsOf(badEmail)).toEqual(['email']);
  const missing = await track(project.secretKey, { email: 'ok@example.org' });
  expect(missing.status).toBe(422);
  expect(fieldsOf(missing)).toEqual(['event']);
  const blank = await track(project.secretKey, { email: 'ok@example.org', event: '   ' });
  expect(blank.status).toBe(422);
  expect(fieldsOf(blank)).toEqual(['event']);

  const noKey = await env.http().post('/v1/track').send({ email: 'ok@example.org', event: 'ok' });
  expect(noKey.status).toBe(401);
  expect(noKey.body.error.code).toBe('MISSING_AUTH');
  const badKey = await track(`pk_${'0'.repeat(64)}`, { email: 'ok@example.org', event: 'ok' });
  expect(badKey.status).toBe(401);
  expect(badKey.body.error.code).toBe('INVALID_API_KEY');

  const afterList = await env.http().get('/events').set(bearer(project.secretKey));
  expect(afterList.body.total).toBe(before);
  const lookup = await env.http().post('/contacts/lookup').set(bearer(project.secretKey)).send({ emails: ['reserved@example.org', 'ok@example.org'] });
  expect(lookup.body.found).toEqual([]);
});

test('Idempotency-Key: a repeat replays without a second event, another body is a 409, a malformed key a 422', async () => {
  const key = `track-${Date.now()}`;
  const body = { email: 'idem@example.org', event: 'idem-event', data: { n: 1 } };
  const first = await env.http().post('/v1/track').set(bearer(project.publicKey)).set('Idempotency-Key', key).send(body);
  expect(first.status).toBe(200);
  expect(first.headers['idempotent-replayed']).toBeUndefined();
  // Same body with its keys in another order is the same request.
  const second = await env
    .http()
    .post('/v1/track')
    .set(bearer(project.publicKey))
    .set('Idempotency-Key', key)
    .send({ data: { n: 1 }, event: 'idem-event', email: 'idem@example.org' });
  expect(second.status).toBe(200);
  expect(second.headers['idempotent-replayed']).toBe('true');
  expect(second.body).toEqual(first.body);
  expect(await eventsNamed('idem-event')).toHaveLength(1);

  const other = await env
    .http()
    .post('/v1/track')
    .set(bearer(project.publicKey))
    .set('Idempotency-Key', key)
    .send({ ...body, data: { n: 2 } });
  expect(other.status).toBe(409);
  expect(other.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  expect(await eventsNamed('idem-event')).toHaveLength(1);
  expect((await contactOf(first.body.data.contact)).data).toEqual({ n: 1 });

  // Keys are per project: another project's identical request is its own.
  const otherProject = await env.project('track other project');
  const elsewhere = await env.http().post('/v1/track').set(bearer(otherProject.publicKey)).set('Idempotency-Key', key).send(body);
  expect(elsewhere.status).toBe(200);
  expect(elsewhere.headers['idempotent-replayed']).toBeUndefined();
  expect(elsewhere.body.data.event).not.toBe(first.body.data.event);
  expect(await eventsNamed('idem-event', otherProject)).toHaveLength(1);

  for (const bad of ['k'.repeat(300), 'has space']) {
    const res = await env.http().post('/v1/track').set(bearer(project.publicKey)).set('Idempotency-Key', bad).send({ ...body, event: 'idem-bad' });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(fieldsOf(res)).toEqual(['Idempotency-Key']);
  }
  expect(await eventsNamed('idem-bad')).toHaveLength(0);
  // 255 characters is still a valid key.
  const longest = await env.http().post('/v1/track').set(bearer(project.publicKey)).set('Idempotency-Key', 'k'.repeat(255)).send({ ...body, event: 'idem-bad' });
  expect(longest.status).toBe(200);
});

test('/events/track is the dashboard alias: secret key only', async () => {
  const ok = await track(project.secretKey, { email: 'alias@example.org', event: 'alias-event', data: { via: 'dashboard' } }, '/events/track');
  expect(ok.status).toBe(200);
  expect(ok.body.success).toBe(true);
  const [stored] = await eventsNamed('alias-event');
  expect(stored).toMatchObject({ id: ok.body.data.event, contactId: ok.body.data.contact, data: { via: 'dashboard' } });
  expect((await contactOf(ok.body.data.contact)).subscribed).toBe(true);

  const pub = await track(project.publicKey, { email: 'alias@example.org', event: 'alias-event' }, '/events/track');
  expect(pub.status).toBe(401);
  expect(pub.body.error.code).toBe('INVALID_API_KEY');
  expect(await eventsNamed('alias-event')).toHaveLength(1);

  const reserved = await track(project.secretKey, { email: 'alias@example.org', event: 'email.opened' }, '/events/track');
  expect(reserved.status).toBe(422);
  expect(fieldsOf(reserved)).toEqual(['event']);
});
