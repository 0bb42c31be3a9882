import { generateDkimKeyPair } from '../../mail/dkim';
import { newId } from '../../db/ids';
import { type QueuedEmail, type SendRequest, SendBatches } from '../../db/messages/send';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { AppError } from '../../errors';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * /v1/send to one recipient without an Idempotency-Key shares its statements with concurrent
 * requests (db/messages/send.ts SendBatches): calls made in one turn of the event loop go as one
 * batch, and each still gets its own answer.
 */
let env: TestEnv;
let project: ProjectWithKeys;
let capped: ProjectWithKeys;

async function addVerifiedDomain(projectId: string, domain: string): Promise<void> {
  const keys = await generateDkimKeyPair();
  await query(
    env.orm.em.fork(),
    `insert into domains (id, project_id, domain, status, dkim_selector, dkim_private_key, dkim_public_key, verified_at)
     values (?, ?, ?, 'verified', ?, ?, ?, now())`,
    [newId('dom'), projectId, domain, keys.selector, keys.privateKeyPem, keys.publicKeyBase64],
  );
}

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('send batches');
  capped = await env.project('send batches, capped');
  await addVerifiedDomain(project.id, 'batch.send.test');
  await addVerifiedDomain(capped.id, 'capped.send.test');
  await query(env.orm.em.fork(), `insert into billing_limits (project_id, category, monthly_limit) values (?, 'transactional', 1000)`, [capped.id]);
});

afterAll(async () => {
  await env.close();
});

const ctx = (projectId: string) => ({
  projectId,
  publicUrl: env.deps.config.publicUrl,
  linkSecret: env.deps.linkSecret,
  maxMessageBytes: 1_000_000,
  senders: env.deps.config,
  queue: env.taskQueue,
});

const contactByEmail = (projectId: string, email: string) =>
  queryOne<{ id: string; subscribed: boolean; data: Record<string, unknown> }>(
    env.orm.em.fork(),
    'select id, subscribed, data from contacts where project_id = ? and email = ?',
    [projectId, email],
  );

const emailRow = (id: string) =>
  queryOne<{ contact_id: string; to_email: string; body: string; status: string; queue: string }>(
    env.orm.em.fork(),
    'select contact_id, to_email, body, status, queue from emails where id = ?',
    [id],
  );

test('one batch: new and existing contacts, a repeat, a subscription change, a bad value, a domain refused, a capped project', async () => {
  const old = (await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'old@batch.io', subscribed: true, data: { plan: 'pro', city: 'Oslo' } })).body;
  const batches = new SendBatches(env.orm);
  const send = (projectId: string, req: Omit<SendRequest, 'from'> & { from?: string }) =>
    batches.send({ em: env.orm.em.fork() }, ctx(projectId), { from: 'me@batch.send.test', subject: 'Hi {{name ?? "you"}}', body: '<p>{{id}} {{plan ?? "none"}} {{city ?? ""}}</p>', ...req }).then(
      (value) => value,
      (err: unknown) => err as Error,
    );
  // In one turn of the event loop: one read and one write statement for all of them (the repeat's write goes second).
  const results = await Promise.all([
    send(project.id, { to: { email: 'New@Batch.io', name: 'Nina' }, data: { plan: 'free' } }),
    send(project.id, { to: 'old@batch.io', subscribed: false, data: { city: null } }),
    send(project.id, { to: 'new@batch.io', data: { plan: 'team' } }),
    send(project.id, { to: 'bad@batch.io', data: { note: 'a\u0000b' } }),
    send(project.id, { to: 'nobody@batch.io', from: 'me@unknown.send.test' }),
    send(capped.id, { to: 'someone@batch.io', from: 'me@capped.send.test' }),
  ]);
  const [first, unsubscribed, repeat, bad, refused, overCap] = results;

  // The new address: its contact was created with the id the email was rendered with.
  expect(first).toHaveLength(1);
  const created = (first as QueuedEmail[])[0]!;
  const fresh = await contactByEmail(project.id, 'new@batch.io');
  expect(created.contact.id).toBe(fresh!.id);
  expect(await emailRow(created.email)).toMatchObject({ contact_id: fresh!.id, to_email: 'new@batch.io', status: 'QUEUED', queue: env.taskQueue });
  expect((await emailRow(created.email))!.body).toContain(`${fresh!.id} free`);

  // The repeat for the same new address went in the next statement: its contact id lost to the
  // first one's, so its email was not written then; read and rendered again, it was written for
  // the contact the first one created.
  const again = (repeat as QueuedEmail[])[0]!;
  expect(again.contact.id).toBe(fresh!.id);
  expect(await emailRow(again.email)).toMatchObject({ contact_id: fresh!.id, status: 'QUEUED' });
  expect((await emailRow(again.email))!.body).toContain(`${fresh!.id} team`);
  expect(await contactByEmail(project.id, 'new@batch.io')).toMatchObject({ subscribed: false, data: { plan: 'team', name: 'Nina' } });

  // The existing contact: rendered as the upsert leaves it (city removed), the change recorded.
  const sent = (unsubscribed as QueuedEmail[])[0]!;
  expect(sent.contact.id).toBe(old.id);
  expect((await emailRow(sent.email))!.body).toContain(`${old.id} pro </p>`);
  expect(await contactByEmail(project.id, 'old@batch.io')).toMatchObject({ subscribed: false, data: { plan: 'pro' } });
  const changes = await query<{ name: string }>(env.orm.em.fork(), 'select name from events where contact_id = ? order by id', [old.id]);
  expect(changes.map((c) => c.name)).toEqual(['contact.unsubscribed']);

  // The value PostgreSQL refuses failed its own request alone and wrote nothing.
  expect(bad).toBeInstanceOf(Error);
  expect(await contactByEmail(project.id, 'bad@batch.io')).toBeUndefined();
  // An unregistered sender domain is refused for that request alone.
  expect(refused).toBeInstanceOf(AppError);
  expect((refused as AppError).code).toBe('DOMAIN_NOT_VERIFIED');
  // A capped project's send is written in a transaction of its own, where the cap is checked.
  const underCap = (overCap as QueuedEmail[])[0]!;
  expect(await emailRow(underCap.email)).toMatchObject({ to_email: 'someone@batch.io', status: 'QUEUED' });
  expect(await contactByEmail(capped.id, 'someone@batch.io')).toMatchObject({ id: underCap.contact.id });
});

test('concurrent /v1/send requests to 30 new addresses and 10 times to one address: each answered once, each email for its contact', async () => {
  const post = (to: string, i: number) =>
    env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: 'me@batch.send.test', subject: `n ${i}`, body: '<p>{{id}} {{i}}</p>', data: { i } });
  const answers = await Promise.all([
    ...Array.from({ length: 30 }, (_, i) => post(`burst${i}@batch.io`, i)),
    ...Array.from({ length: 10 }, (_, i) => post('same@batch.io', i)),
  ]);
  expect(answers.map((a) => a.status)).toEqual(Array(40).fill(200));
  const ids = answers.map((a) => a.body.data.emails[0].email as string);
  expect(new Set(ids).size).toBe(40);
  const rows = await query<{ id: string; contact_id: string; to_email: string; body: string }>(
    env.orm.em.fork(),
    `select e.id, e.contact_id, e.to_email, e.body from emails e where e.id = any(?::uuid[])`,
    [ids],
  );
  expect(rows).toHaveLength(40);
  for (const row of rows) {
    const contact = await contactByEmail(project.id, row.to_email);
    expect(row.contact_id).toBe(contact!.id);
    expect(row.body).toContain(`${contact!.id} `);
  }
  expect(await contactByEmail(project.id, 'burst7@batch.io')).toMatchObject({ data: { i: 7 } });
});

test('the common /v1/send forks no entity manager: its statements are shared, and its wake-up NOTIFY goes through one manager', async () => {
  const post = () => env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to: 'nofork@batch.io', from: 'me@batch.send.test', subject: 's', body: '<p>b</p>' });
  await post().expect(200);
  const fork = jest.spyOn(env.orm.em, 'fork');
  try {
    await post().expect(200);
    expect(fork).not.toHaveBeenCalled();
    // A template is read through the request's own manager.
    const template = await env.http().post('/templates').set(bearer(project.secretKey)).send({ name: 'fork', subject: 's', body: '<p>t</p>', from: 'me@batch.send.test' });
    expect(template.status).toBe(201);
    fork.mockClear();
    await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to: 'nofork@batch.io', template: template.body.id }).expect(200);
    expect(fork).toHaveBeenCalled();
  } finally {
    fork.mockRestore();
  }
});
