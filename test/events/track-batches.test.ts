import { trackEvents } from '../../db/events/track';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/** Tracked events of concurrent requests share statements (db/events/track.ts TrackBatches): each still gets its own answer. */
let env: TestEnv;
let project: ProjectWithKeys;

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('track batches');
});

afterAll(async () => {
  await env.close();
});

const contactByEmail = (email: string) =>
  queryOne<{ id: string; subscribed: boolean; data: Record<string, unknown> }>(
    env.orm.em.fork(),
    'select id, subscribed, data from contacts where project_id = ? and email = ?',
    [project.id, email],
  );
const eventsOf = (contactId: string) =>
  query<{ id: string; name: string; data: Record<string, unknown> }>(env.orm.em.fork(), 'select id, name, data from events where contact_id = ? order by id', [
    contactId,
  ]);

test('one batch: new and existing contacts, a repeat of one, a subscription change, first type wins, one bad value fails alone', async () => {
  const em = env.orm.em.fork();
  const old = (await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'old@batch.io', data: { plan: 'pro' } })).body;
  expect(old.subscribed).toBe(true);

  const results = await trackEvents(em, [
    { projectId: project.id, req: { email: 'New@Batch.io', event: 'signup', data: { score: 1, plan: 'free' } } },
    { projectId: project.id, req: { email: 'old@batch.io', event: 'churn', subscribed: false, data: { plan: null } } },
    { projectId: project.id, req: { email: 'new@batch.io', event: 'upgrade', data: { score: 'high' } } },
    { projectId: project.id, req: { email: 'bad@batch.io', event: 'signup', data: { note: 'a\u0000b' } } },
    { projectId: project.id, req: { email: 'once@batch.io', event: 'signup', data: { code: { value: 'X-1', persistent: false } } } },
  ]);
  expect(results.map((r) => (r instanceof Error ? 'error' : 'tracked'))).toEqual(['tracked', 'tracked', 'tracked', 'error', 'tracked']);
  const [first, churn, repeat, , once] = results as { contact: string; event: string; timestamp: string; queued: boolean }[];

  // The repeat went after the first, on the same contact: data merged in order.
  expect(repeat!.contact).toBe(first!.contact);
  const fresh = await contactByEmail('new@batch.io');
  expect(fresh).toMatchObject({ id: first!.contact, subscribed: true, data: { score: 'high', plan: 'free' } });
  expect((await eventsOf(first!.contact)).map((e) => [e.id, e.name])).toEqual([
    [first!.event, 'signup'],
    [repeat!.event, 'upgrade'],
  ]);
  // The key's type is the one first seen (docs/design.md, `data` rules).
  const field = await queryOne<{ type: string }>(em, 'select type from contact_fields where project_id = ? and key = ?', [project.id, 'score']);
  expect(field!.type).toBe('number');

  // The explicit unsubscribe changed the state: contact.unsubscribed, sorted before the event that carried it.
  expect(churn!.contact).toBe(old.id);
  expect(await contactByEmail('old@batch.io')).toMatchObject({ subscribed: false, data: {} });
  expect((await eventsOf(old.id)).map((e) => e.name)).toEqual(['contact.unsubscribed', 'churn']);

  // The value PostgreSQL refuses failed its own request and wrote nothing; one-shot values are stored nowhere.
  expect(await contactByEmail('bad@batch.io')).toBeUndefined();
  expect((await contactByEmail('once@batch.io'))!.data).toEqual({});
  expect((await eventsOf(once!.contact)).map((e) => e.data)).toEqual([{}]);
  // Nothing listens to these names: no outbox rows.
  expect(results.filter((r) => !(r instanceof Error) && r.queued)).toEqual([]);
  const outbox = await queryOne<{ n: number }>(em, 'select count(*)::int as n from trigger_outbox where project_id = ?', [project.id]);
  expect(outbox!.n).toBe(0);
});

test('concurrent /v1/track requests, 30 for new contacts and 30 for one contact, each answered and stored once', async () => {
  const send = (email: string, i: number) =>
    env.http().post('/v1/track').set(bearer(project.publicKey)).send({ email, event: 'burst', data: { i } });
  const answers = await Promise.all([
    ...Array.from({ length: 30 }, (_, i) => send(`burst${i}@batch.io`, i)),
    ...Array.from({ length: 30 }, (_, i) => send('same@batch.io', i)),
  ]);
  expect(answers.map((a) => a.status)).toEqual(Array(60).fill(200));
  expect(new Set(answers.map((a) => a.body.data.event)).size).toBe(60);
  const same = await contactByEmail('same@batch.io');
  expect(new Set(answers.slice(30).map((a) => a.body.data.contact))).toEqual(new Set([same!.id]));
  expect((await eventsOf(same!.id)).map((e) => e.name)).toEqual(Array(30).fill('burst'));
  const stored = await queryOne<{ n: number }>(
    env.orm.em.fork(),
    `select count(*)::int as n from events where project_id = ? and name = 'burst'`,
    [project.id],
  );
  expect(stored!.n).toBe(60);
});
