import { DeliveryHandoff } from '../../db/messages/delivery-handoff';
import type { EmailForDelivery } from '../../db/messages/emails';
import { SendBatches } from '../../db/messages/send';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { createJourneyActivities } from '../../temporal/journeys/activities';
import { bearer } from '../helpers/env';
import { buildJourney, track } from '../helpers/journeys';
import { startSendingEnv, type SendingEnv, waitUntil } from '../helpers/sending';

/**
 * With the API and the worker in one process (`tidings start`, and the test environment), /v1/send
 * writes its email already claimed (SENDING, attempt 1, leased to the engine) and hands it to a
 * round of the delivery engine in memory (db/messages/delivery-handoff.ts), instead of writing it
 * QUEUED for an engine to claim from the table. What must hold: such an email is sent once, by the
 * round it was handed to; a claim no round can take any more is given back (QUEUED) and claimed
 * from the table; and an email handed to a process that dies is claimed again when its lease runs
 * out, so a 200 still survives the process. A journey's SEND_EMAIL step hands its email over the
 * same way, from the worker.
 */
const DOMAIN = 'handoff.test';
const LEASE_SECONDS = 5;
let s: SendingEnv;
let project: ProjectWithKeys;
const tag = Date.now();

beforeAll(async () => {
  s = await startSendingEnv({ DELIVERY_LEASE_SECONDS: String(LEASE_SECONDS) });
  project = await s.env.project('handoff');
  await s.verifiedDomain(project, DOMAIN);
});

afterAll(async () => {
  await s?.close();
});

const db = () => s.env.orm.em.fork();
const received = (to: string) => s.smtp.messages.filter((m) => m.envelope.to.includes(to));

interface EmailRow {
  status: string;
  attempts: number;
  lease_owner: string | null;
  leased: boolean;
  /** last_attempt_at = created_at: the row was written claimed, in the insert's own statement. */
  written_claimed: boolean;
}
const emailRow = (id: string) =>
  queryOne<EmailRow>(
    db(),
    `select status, attempts, lease_owner, lease_until is not null as leased, coalesce(last_attempt_at = created_at, false) as written_claimed
     from emails where id = ?`,
    [id],
  ).then((row) => row!);

const ctx = () => ({
  projectId: project.id,
  publicUrl: s.env.deps.config.publicUrl,
  linkSecret: s.env.deps.linkSecret,
  maxMessageBytes: 1_000_000,
  senders: s.env.deps.config,
  queue: s.env.taskQueue,
});

/** A send through `batches` (its own hand-off), as the route makes it. */
async function sendThrough(batches: SendBatches, to: string): Promise<{ id: string; handedOff: boolean }> {
  const result = await batches.send({ em: db() }, ctx(), { to, from: `me@${DOMAIN}`, subject: 'Hi', body: '<p>Hello</p>' });
  if (!('emails' in result)) throw new Error('the common path did not apply');
  return { id: result.emails[0]!.email, handedOff: !result.wake };
}

/** A hand-off whose one round of the test's queue closes while an email is being written (after its place was reserved). */
function roundClosingDuringWrite(): DeliveryHandoff {
  const handoff = new DeliveryHandoff(LEASE_SECONDS);
  const close = handoff.open(s.env.taskQueue, 4, () => undefined);
  const reserve = handoff.reserve.bind(handoff);
  handoff.reserve = (queue, subject, body) => {
    const reservation = reserve(queue, subject, body);
    close();
    return reservation;
  };
  return handoff;
}

async function createTemplate(name: string): Promise<string> {
  const res = await s.env.http().post('/templates').set(bearer(project.secretKey)).send({ name, subject: 'Hi', body: '<p>Hi</p>', from: `hello@${DOMAIN}` });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe('DeliveryHandoff', () => {
  const email = (id: string) => ({ email: { id } }) as EmailForDelivery;
  /** A place for an email of 10 characters of subject and body. */
  const place = (handoff: DeliveryHandoff, queue = 'q') => handoff.reserve(queue, 'Hi', 'Hi there');

  test('takes emails only while a round is open, up to the rounds’ capacity', () => {
    const handoff = new DeliveryHandoff(60);
    expect(place(handoff)).toBeUndefined();
    const wakes: string[] = [];
    const closeA = handoff.open('q', 2, () => wakes.push('a'));
    const closeB = handoff.open('q', 1, () => wakes.push('b'));
    const [r1, r2, r3] = [place(handoff)!, place(handoff)!, place(handoff)!];
    expect(r1.leaseSeconds).toBe(60);
    // Reserved places count: 3 of 3.
    expect(place(handoff)).toBeUndefined();
    expect(place(handoff, 'other')).toBeUndefined();
    r3.cancel();
    expect(() => r3.cancel()).toThrow(/settled once/);
    expect(r1.deliver(email('e1'))).toBe(true);
    expect(r2.deliver(email('e2'))).toBe(true);
    expect(wakes).toEqual(['a', 'a']);
    expect(handoff.waiting('q')).toEqual(['e1', 'e2']);
    // The buffer counts too.
    expect(place(handoff)).toBeDefined();
    expect(handoff.take('q')?.email.id).toBe('e1');
    // Closing a round while another is open leaves the buffer to it; the last one takes the rest.
    expect(closeA()).toEqual([]);
    expect(closeB().map((e) => e.email.id)).toEqual(['e2']);
    expect(handoff.take('q')).toBeUndefined();
  });

  test('a reservation whose rounds all closed before the write is not delivered', () => {
    const handoff = new DeliveryHandoff(60);
    const close = handoff.open('q', 4, () => undefined);
    const reservation = place(handoff)!;
    close();
    expect(reservation.deliver(email('late'))).toBe(false);
    expect(handoff.waiting('q')).toEqual([]);
  });

  test('holds at most its characters of subjects and bodies, whatever the rounds would take', () => {
    const handoff = new DeliveryHandoff(60, 25);
    const close = handoff.open('q', 100, () => undefined);
    const [r1, r2] = [place(handoff)!, place(handoff)!];
    // 20 of 25 reserved: another 10 do not fit, 5 do.
    expect(place(handoff)).toBeUndefined();
    const small = handoff.reserve('q', 'Hi', '123')!;
    expect(small).toBeDefined();
    small.cancel();
    r2.cancel();
    // Delivered, an email keeps its place until it is taken.
    expect(r1.deliver(email('e1'))).toBe(true);
    const r4 = place(handoff)!;
    expect(place(handoff)).toBeUndefined();
    expect(handoff.take('q')?.email.id).toBe('e1');
    place(handoff)!.cancel();
    expect(r4.deliver(email('e4'))).toBe(true);
    // The last round to close takes the rest and its characters.
    expect(close().map((e) => e.email.id)).toEqual(['e4']);
    handoff.open('q', 100, () => undefined);
    expect([place(handoff), place(handoff), place(handoff)].map(Boolean)).toEqual([true, true, false]);
  });
});

test('/v1/send hands its email to the engine claimed: written SENDING in its insert, sent once with one attempt', async () => {
  const to = `handed-${tag}@example.org`;
  const res = await s.env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `me@${DOMAIN}`, subject: 'Hi', body: '<p>Hello</p>' });
  expect(res.status).toBe(200);
  const id = res.body.data.emails[0].email as string;
  await waitUntil(async () => (await emailRow(id)).status === 'SENT');
  // Claimed again after its lease ran out, it would count two attempts.
  expect(await emailRow(id)).toEqual({ status: 'SENT', attempts: 1, lease_owner: null, leased: false, written_claimed: true });
  await new Promise((r) => setTimeout(r, 300));
  expect(received(to)).toHaveLength(1);
});

test('with an Idempotency-Key and several recipients too; a suppressed recipient fails, an email with attachments is claimed from the table', async () => {
  const to = [0, 1, 2].map((i) => `keyed-${i}-${tag}@example.org`);
  await query(db(), `insert into suppressions (project_id, email, reason) values (?, ?, 'hard_bounce')`, [project.id, to[2]]);
  const send = (body: Record<string, unknown>, key: string) =>
    s.env.http().post('/v1/send').set(bearer(project.secretKey)).set('Idempotency-Key', key).send({ from: `me@${DOMAIN}`, subject: 'Hi', body: '<p>Hello</p>', ...body });
  const res = await send({ to }, `keyed-${tag}`);
  expect(res.status).toBe(200);
  const ids = (res.body.data.emails as { email: string }[]).map((e) => e.email);
  await waitUntil(async () => (await Promise.all(ids.map(emailRow))).every((r) => r.status !== 'SENDING'));
  const rows = await Promise.all(ids.map(emailRow));
  expect(rows.map((r) => [r.status, r.attempts, r.written_claimed])).toEqual([
    ['SENT', 1, true],
    ['SENT', 1, true],
    // Never offered to the relay: the attempt its claim counted is taken back.
    ['FAILED', 0, true],
  ]);
  expect((await queryOne<{ error: string }>(db(), 'select error from emails where id = ?', [ids[2]]))!.error).toBe('suppressed');
  // The replay hands nothing over again.
  expect((await send({ to }, `keyed-${tag}`)).body).toEqual(res.body);

  const withFile = `attached-${tag}@example.org`;
  const attached = await send({ to: withFile, attachments: [{ filename: 'a.txt', content: Buffer.from('hi').toString('base64'), contentType: 'text/plain' }] }, `attached-${tag}`);
  expect(attached.status).toBe(200);
  const attachedId = attached.body.data.emails[0].email as string;
  await waitUntil(async () => (await emailRow(attachedId)).status === 'SENT');
  expect(await emailRow(attachedId)).toMatchObject({ attempts: 1, written_claimed: false });
  await new Promise((r) => setTimeout(r, 300));
  for (const address of [to[0]!, to[1]!, withFile]) expect(received(address)).toHaveLength(1);
  expect(received(to[2]!)).toHaveLength(0);
});

test('a journey’s SEND_EMAIL step hands its email to the engine claimed too: sent once, with one attempt', async () => {
  const templateId = await createTemplate(`handoff ${tag}`);
  const event = `handoff-${tag}`;
  await buildJourney(s.env, project, { eventName: event, steps: [{ key: 'send', type: 'SEND_EMAIL', config: { templateId } }], transitions: [['trigger', 'send']] });
  const to = `journey-${tag}@example.org`;
  await track(s.env, project, to, event);
  const sentRow = () => queryOne<{ id: string }>(db(), `select id from emails where project_id = ? and to_email = ? and status = 'SENT'`, [project.id, to]);
  await waitUntil(async () => (await sentRow()) !== undefined);
  expect(await emailRow((await sentRow())!.id)).toEqual({ status: 'SENT', attempts: 1, lease_owner: null, leased: false, written_claimed: true });
  await new Promise((r) => setTimeout(r, 300));
  expect(received(to)).toHaveLength(1);
});

test('a claim no round can take any more goes back QUEUED, and an engine claims it from the table', async () => {
  const handoff = roundClosingDuringWrite();
  const to = `given-back-${tag}@example.org`;
  const sent = await sendThrough(new SendBatches(s.env.orm, handoff), to);
  expect(sent.handedOff).toBe(false);
  // The engine looks at the table about once a second without a wake-up; long before the lease would run out.
  const started = Date.now();
  await waitUntil(async () => (await emailRow(sent.id)).status === 'SENT');
  expect(Date.now() - started).toBeLessThan(LEASE_SECONDS * 1000);
  // Given back, the attempt the write counted was taken back: claimed again after its lease ran out instead, it would count two.
  expect(await emailRow(sent.id)).toMatchObject({ attempts: 1, written_claimed: false });
  expect(received(to)).toHaveLength(1);
});

test('a journey email whose round closed during its write goes back QUEUED, and an engine claims it from the table', async () => {
  const templateId = await createTemplate(`given back ${tag}`);
  const to = `journey-given-back-${tag}@example.org`;
  const { contact } = await track(s.env, project, to, `nothing-listens-${tag}`);
  const handoff = roundClosingDuringWrite();
  const { queueJourneyEmail } = createJourneyActivities({ orm: s.env.orm, config: s.env.deps.config, handoff });
  const queued = await queueJourneyEmail({
    executionId: `given-back-${tag}`,
    seq: 1,
    projectId: project.id,
    contactId: contact,
    templateId,
    recipient: { type: 'CONTACT' },
    context: {},
  });
  const started = Date.now();
  await waitUntil(async () => (await emailRow(queued.emailId!)).status === 'SENT');
  expect(Date.now() - started).toBeLessThan(LEASE_SECONDS * 1000);
  expect(await emailRow(queued.emailId!)).toMatchObject({ attempts: 1, written_claimed: false });
  expect(received(to)).toHaveLength(1);
});

test('emails handed to a process that dies are claimed again when their lease runs out, and sent once', async () => {
  // A round that takes the emails and never sends them: the process holding them is gone.
  const handoff = new DeliveryHandoff(LEASE_SECONDS);
  handoff.open(s.env.taskQueue, 8, () => undefined);
  const batches = new SendBatches(s.env.orm, handoff);
  const to = [0, 1, 2].map((i) => `orphaned-${i}-${tag}@example.org`);
  const sent = await Promise.all(to.map((address) => sendThrough(batches, address)));
  expect(sent.map((x) => x.handedOff)).toEqual([true, true, true]);
  expect(handoff.waiting(s.env.taskQueue).sort()).toEqual(sent.map((x) => x.id).sort());
  for (const { id } of sent) expect(await emailRow(id)).toMatchObject({ status: 'SENDING', attempts: 1, lease_owner: 'engine', leased: true, written_claimed: true });

  await waitUntil(async () => (await Promise.all(sent.map(({ id }) => emailRow(id)))).every((r) => r.status === 'SENT'), (LEASE_SECONDS + 15) * 1000);
  for (const { id } of sent) expect(await emailRow(id)).toMatchObject({ attempts: 2, written_claimed: false });
  for (const address of to) expect(received(address)).toHaveLength(1);
});
