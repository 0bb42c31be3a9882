import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { signContactToken } from '../../mail/links';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney, listExecutions, track, waitForExecution } from '../helpers/journeys';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

// A journey second lasts 1 ms here: a WAIT_FOR_EVENT timeout of 8,000 s lasts 8 s.
const TIME_SCALE = 1 / 1000;
const DOMAIN = 'system-events.test';
const PUBLIC_URL = 'http://tidings.test';

let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let project: ProjectWithKeys;
let newsletter: string;
let thanks: string;
let reminder: string;
let goodbye: string;

async function template(name: string, subject: string, type: 'MARKETING' | 'TRANSACTIONAL') {
  const body = `<html><body><p>${subject} {{email}}</p></body></html>`;
  const res = await env.http().post('/templates').set(bearer(project.secretKey)).send({ name, subject, body, from: `hello@${DOMAIN}`, type });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const subjectsTo = async (address: string) =>
  (await Promise.all(smtp.messages.filter((m) => m.envelope.to.includes(address)).map((m) => simpleParser(m.raw)))).map((m) => m.subject);

/** Fetches the open pixel of the mail with this subject to this address, as a mail client would. */
async function openMail(address: string, subject: string): Promise<void> {
  const mail = await waitUntil(async () => {
    for (const m of smtp.messages.filter((x) => x.envelope.to.includes(address))) {
      const parsed = await simpleParser(m.raw);
      if (parsed.subject === subject) return parsed;
    }
    return undefined;
  });
  const pixel = /<img src="([^"]+)" width="1" height="1"/.exec(String(mail.html))?.[1];
  expect(pixel?.startsWith(`${PUBLIC_URL}/t/o/`)).toBe(true);
  await env.http().get(pixel!.slice(PUBLIC_URL.length)).expect(200);
}

const eventNames = async (contactId: string) =>
  ((await env.http().get(`/events/contact/${contactId}`).set(bearer(project.secretKey))).body.data as { name: string }[]).map((e) => e.name);

/** The dispatcher has taken every outbox row of the project: what the recorded events cause has been started. */
const outboxDrained = () =>
  waitUntil(async () => (await queryOne<{ n: number }>(env.orm.em.fork(), 'select count(*)::int as n from trigger_outbox where project_id = ?', [project.id]))!.n === 0);

beforeAll(async () => {
  sending = await startSendingEnv({ JOURNEY_TIME_SCALE: String(TIME_SCALE), PUBLIC_URL });
  ({ env, smtp } = sending);
  project = await env.project('system events');
  await sending.verifiedDomain(project, DOMAIN);
  newsletter = await template('newsletter', 'Our news', 'MARKETING');
  thanks = await template('thanks', 'Thanks for reading', 'TRANSACTIONAL');
  reminder = await template('reminder', 'You missed our news', 'TRANSACTIONAL');
  goodbye = await template('goodbye', 'Sorry to see you go', 'TRANSACTIONAL');
});

afterAll(() => sending.close());

test('a journey waits for the open of its own email: opened → thanks; not opened, or another email opened → reminder', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'signup',
    steps: [
      { key: 'news', type: 'SEND_EMAIL', config: { templateId: newsletter } },
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'email.opened', timeout: 8000 } },
      { key: 'thanks', type: 'SEND_EMAIL', config: { templateId: thanks } },
      { key: 'reminder', type: 'SEND_EMAIL', config: { templateId: reminder } },
    ],
    transitions: [
      ['trigger', 'news'],
      ['news', 'wait'],
      ['wait', 'thanks', 'event'],
      ['wait', 'reminder', 'timeout'],
    ],
  });

  const reader = await track(env, project, 'reader@example.org', 'signup');
  const idle = await track(env, project, 'idle@example.org', 'signup');
  const other = await track(env, project, 'other@example.org', 'signup');
  // The reader opens the journey's email; the other contact opens a different email of ours during the wait.
  await openMail('reader@example.org', 'Our news');
  const sent = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: 'other@example.org', template: newsletter, subject: 'Another letter' });
  expect(sent.status).toBe(200);
  await openMail('other@example.org', 'Another letter');

  const readerRun = await waitForExecution(env, project, wf.id, reader.contact, ['COMPLETED'], 30_000);
  expect(readerRun.steps!.map((s) => [s.stepType, s.branch])).toEqual([
    ['SEND_EMAIL', null],
    ['WAIT_FOR_EVENT', 'event'],
    ['SEND_EMAIL', null],
  ]);
  await waitUntil(async () => (await subjectsTo('reader@example.org')).includes('Thanks for reading'));
  expect((await subjectsTo('reader@example.org')).sort()).toEqual(['Our news', 'Thanks for reading']);

  for (const contact of [idle, other]) {
    const run = await waitForExecution(env, project, wf.id, contact.contact, ['COMPLETED'], 30_000);
    expect(run.steps!.map((s) => [s.stepType, s.branch])).toEqual([
      ['SEND_EMAIL', null],
      ['WAIT_FOR_EVENT', 'timeout'],
      ['SEND_EMAIL', null],
    ]);
  }
  await waitUntil(async () => (await subjectsTo('idle@example.org')).includes('You missed our news'));
  expect(await subjectsTo('idle@example.org')).not.toContain('Thanks for reading');
  expect((await eventNames(other.contact)).filter((n) => n === 'email.opened')).toHaveLength(1);
  await waitUntil(async () => (await subjectsTo('other@example.org')).includes('You missed our news'));
  expect(await subjectsTo('other@example.org')).not.toContain('Thanks for reading');
});

test('an open during a DELAY before the wait still ends the wait for that email', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'delayed-signup',
    steps: [
      { key: 'news', type: 'SEND_EMAIL', config: { templateId: newsletter } },
      { key: 'pause', type: 'DELAY', config: { amount: 2, unit: 'hours' } },
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'email.opened', timeout: 8000 } },
      { key: 'thanks', type: 'SEND_EMAIL', config: { templateId: thanks } },
      { key: 'reminder', type: 'SEND_EMAIL', config: { templateId: reminder } },
    ],
    transitions: [
      ['trigger', 'news'],
      ['news', 'pause'],
      ['pause', 'wait'],
      ['wait', 'thanks', 'event'],
      ['wait', 'reminder', 'timeout'],
    ],
  });
  const early = await track(env, project, 'early@example.org', 'delayed-signup');
  // Two journey hours last 7.2 s here: the open comes while the execution is in its DELAY.
  await openMail('early@example.org', 'Our news');
  const running = (await listExecutions(env, project, wf.id)).find((e) => e.contactId === early.contact)!;
  expect(running.currentStepId).toBe(wf.stepIds.pause);
  const run = await waitForExecution(env, project, wf.id, early.contact, ['COMPLETED'], 30_000);
  expect(run.steps!.map((s) => [s.stepType, s.branch])).toEqual([
    ['SEND_EMAIL', null],
    ['DELAY', null],
    ['WAIT_FOR_EVENT', 'event'],
    ['SEND_EMAIL', null],
  ]);
});

test('PATCH /contacts {subscribed:false} records contact.unsubscribed once and starts the journey it triggers; a no-op records nothing', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'contact.unsubscribed',
    allowReentry: true,
    steps: [{ key: 'bye', type: 'SEND_EMAIL', config: { templateId: goodbye } }],
    transitions: [['trigger', 'bye']],
  });
  const auth = bearer(project.secretKey);
  const created = await env.http().post('/contacts').set(auth).send({ email: 'leaver@example.org', subscribed: true });
  expect(created.status).toBe(201);
  const id = created.body.id as string;

  expect((await env.http().patch(`/contacts/${id}`).set(auth).send({ subscribed: false })).status).toBe(200);
  await waitForExecution(env, project, wf.id, id, ['COMPLETED'], 30_000);
  await waitUntil(async () => (await subjectsTo('leaver@example.org')).includes('Sorry to see you go'));

  // Unsubscribing again changes nothing: no event, so no second execution.
  expect((await env.http().patch(`/contacts/${id}`).set(auth).send({ subscribed: false })).status).toBe(200);
  expect((await env.http().post('/contacts').set(auth).send({ email: 'leaver@example.org', subscribed: false })).status).toBe(200);
  await outboxDrained();
  expect((await eventNames(id)).filter((n) => n.startsWith('contact.'))).toEqual(['contact.unsubscribed']);
  expect((await listExecutions(env, project, wf.id)).filter((e) => e.contactId === id)).toHaveLength(1);

  // POST /contacts upserting a subscription change records it too.
  expect((await env.http().post('/contacts').set(auth).send({ email: 'leaver@example.org', subscribed: true })).status).toBe(200);
  expect((await env.http().post('/contacts').set(auth).send({ email: 'leaver@example.org', subscribed: false })).status).toBe(200);
  await waitUntil(async () => (await listExecutions(env, project, wf.id)).filter((e) => e.contactId === id && e.status === 'COMPLETED').length === 2);
  expect((await eventNames(id)).filter((n) => n.startsWith('contact.'))).toEqual(['contact.unsubscribed', 'contact.subscribed', 'contact.unsubscribed']);
});

test('an RFC 8058 one-click unsubscribe and a bulk unsubscribe start the journey too', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'contact.unsubscribed',
    steps: [{ key: 'bye', type: 'SEND_EMAIL', config: { templateId: goodbye } }],
    transitions: [['trigger', 'bye']],
  });
  const auth = bearer(project.secretKey);
  const clicker = (await env.http().post('/contacts').set(auth).send({ email: 'clicker@example.org', subscribed: true })).body.id as string;
  const bulked = (await env.http().post('/contacts').set(auth).send({ email: 'bulked@example.org', subscribed: true })).body.id as string;

  const token = signContactToken(env.deps.linkSecret, clicker);
  expect((await env.http().post(`/unsubscribe/${token}`).type('form').send('List-Unsubscribe=One-Click')).status).toBe(200);
  const job = await env.http().post('/contacts/bulk-unsubscribe').set(auth).send({ ids: [bulked] });
  expect(job.status).toBe(202);

  for (const id of [clicker, bulked]) await waitForExecution(env, project, wf.id, id, ['COMPLETED'], 30_000);
  await waitUntil(async () => (await subjectsTo('bulked@example.org')).includes('Sorry to see you go'));
  await waitUntil(async () => (await subjectsTo('clicker@example.org')).includes('Sorry to see you go'));
});

test('the loop rule: the events of a journey’s own email and its own contact changes start no journey', async () => {
  const echo = await template('echo', 'Echo', 'TRANSACTIONAL');
  // Triggered by any sent email, and sends one itself; re-entry allowed, so only the rule stops a loop.
  const wf = await buildJourney(env, project, {
    eventName: 'email.sent',
    allowReentry: true,
    steps: [
      { key: 'echo', type: 'SEND_EMAIL', config: { templateId: echo } },
      { key: 'leave', type: 'UPDATE_CONTACT', config: { subscribed: false } },
    ],
    transitions: [
      ['trigger', 'echo'],
      ['echo', 'leave'],
    ],
  });
  // Triggered by unsubscribes: the journey above unsubscribes the contact, which must not start this.
  const onLeave = await buildJourney(env, project, {
    eventName: 'contact.unsubscribed',
    allowReentry: true,
    steps: [{ key: 'bye', type: 'SEND_EMAIL', config: { templateId: goodbye } }],
    transitions: [['trigger', 'bye']],
  });

  const sent = await env
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: 'echo@example.org', subject: 'Hello', body: '<p>Hello</p>', from: `hello@${DOMAIN}`, subscribed: true });
  expect(sent.status).toBe(200);
  const contactId = sent.body.data.emails[0].contact.id as string;

  // The transactional email's email.sent starts the journey; its own email and unsubscribe follow.
  await waitForExecution(env, project, wf.id, contactId, ['COMPLETED'], 30_000);
  await waitUntil(async () => (await eventNames(contactId)).filter((n) => n === 'email.sent').length === 2);
  await waitUntil(async () => (await eventNames(contactId)).includes('contact.unsubscribed'));
  await outboxDrained();
  expect((await listExecutions(env, project, wf.id)).filter((e) => e.contactId === contactId)).toHaveLength(1);
  expect((await listExecutions(env, project, onLeave.id)).filter((e) => e.contactId === contactId)).toHaveLength(0);
  expect((await subjectsTo('echo@example.org')).sort()).toEqual(['Echo', 'Hello']);
});

test('a system event name the service never records is refused with 422; the catalogue lists the ones it does', async () => {
  const auth = bearer(project.secretKey);
  const bad = await env.http().post('/workflows').set(auth).send({ name: 'typo', eventName: 'email.opend' });
  expect(bad.status).toBe(422);
  expect(JSON.stringify(bad.body.error.errors)).toContain('email.opened');

  const wf = await env.http().post('/workflows').set(auth).send({ name: 'ok', eventName: 'segment.vip.entry' });
  expect(wf.status).toBe(201);
  const step = await env.http().post(`/workflows/${wf.body.id}/steps`).set(auth).send({ type: 'WAIT_FOR_EVENT', config: { eventName: 'contact.unsubscrbed' } });
  expect(step.status).toBe(422);
  const good = await env.http().post(`/workflows/${wf.body.id}/steps`).set(auth).send({ type: 'WAIT_FOR_EVENT', config: { eventName: 'email.clicked' } });
  expect(good.status).toBe(201);

  const catalogue = await env.http().get('/events/system').set(auth);
  expect(catalogue.status).toBe(200);
  const names = (catalogue.body.events as { name: string }[]).map((e) => e.name);
  expect(names).toEqual(expect.arrayContaining(['email.sent', 'email.opened', 'email.bounced', 'email.received', 'contact.unsubscribed', 'segment.<slug>.entry']));
});
