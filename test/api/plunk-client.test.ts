import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Plunk from '@plunk/node';
import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { bearer, type TestEnv } from '../helpers/env';
import { type SendingEnv, startSendingEnv } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * The official Node client (@plunk/node), unchanged, against the API on a real HTTP port:
 * its paths (`<baseUrl>track`, `<baseUrl>send`), its bodies (it adds `type`), and its error
 * handling (it reads only the top-level `message` of an error body).
 */

let sending: SendingEnv;
let smtp: SmtpSink;
let env: TestEnv;
let server: Server;
let baseUrl: string;
let project: ProjectWithKeys;

const DOMAIN = 'acme-client.test';

/** What the client threw (class and message); fails when it did not throw. */
async function thrown(promise: Promise<unknown>): Promise<{ type: string; message: string }> {
  try {
    await promise;
  } catch (err) {
    return { type: (err as Error).constructor.name, message: (err as Error).message };
  }
  throw new Error('the client did not throw');
}

beforeAll(async () => {
  sending = await startSendingEnv();
  ({ env, smtp } = sending);
  project = await env.project('client project');
  await sending.verifiedDomain(project, DOMAIN);
  server = env.app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`;
});

afterAll(async () => {
  // The client's fetch keeps connections alive; drop them so close() returns at once.
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await sending.close();
});

test('events.track with the secret and the public key', async () => {
  const plunk = new Plunk(project.secretKey, { baseUrl });
  const result = await plunk.events.track({
    event: 'client-signed-up',
    email: 'client@example.org',
    data: { plan: 'pro', code: { value: 'one-shot', persistent: false } },
  });
  expect(result).toEqual({ success: true, data: { contact: expect.stringMatching(/^cnt_/), event: expect.stringMatching(/^evt_/), timestamp: expect.any(String) } });
  const { contact, event } = (result as unknown as { data: { contact: string; event: string } }).data;
  const stored = await env.http().get(`/contacts/${contact}`).set(bearer(project.secretKey));
  expect(stored.body).toMatchObject({ email: 'client@example.org', subscribed: true, data: { plan: 'pro' } });

  const browser = new Plunk(project.publicKey, { baseUrl });
  await browser.events.track({ event: 'client-visited', email: 'client@example.org', subscribed: false });
  const after = await env.http().get(`/contacts/${contact}`).set(bearer(project.secretKey));
  expect(after.body.subscribed).toBe(false);
  const events = await env.http().get(`/events/contact/${contact}`).set(bearer(project.secretKey));
  // (contact.* events are track.test.ts's subject.)
  const tracked = (events.body.data as { id: string; name: string; data: object }[]).filter((e) => !e.name.startsWith('contact.'));
  expect(tracked.map((e) => e.name)).toEqual(['client-visited', 'client-signed-up']);
  expect(tracked[1]!.id).toBe(event);
  expect(tracked[1]!.data).toEqual({ plan: 'pro' });
});

test('emails.send delivers through the sink', async () => {
  smtp.clear();
  const plunk = new Plunk(project.secretKey, { baseUrl });
  const result = await plunk.emails.send({
    to: ['first@example.org', 'second@example.org'],
    subject: 'Hello {{email}}',
    body: '<p>Sent by the client</p>',
    type: 'html',
    from: `hello@${DOMAIN}`,
    name: 'Acme Client',
  });
  const data = (result as unknown as { data: { emails: { contact: { id: string; email: string }; email: string }[] } }).data;
  expect(result.success).toBe(true);
  expect(data.emails.map((e) => e.contact.email)).toEqual(['first@example.org', 'second@example.org']);
  const messages = await smtp.waitFor(2);
  const parsed = await Promise.all(messages.map((m) => simpleParser(m.raw)));
  expect(parsed.map((p) => p.subject).sort()).toEqual(['Hello first@example.org', 'Hello second@example.org']);
  for (const p of parsed) {
    expect(p.from?.value[0]).toEqual({ name: 'Acme Client', address: `hello@${DOMAIN}` });
    expect(p.html).toContain('<p>Sent by the client</p>');
  }
  // The client's default: a contact created by a send is not subscribed.
  const contact = await env.http().get(`/contacts/${data.emails[0]!.contact.id}`).set(bearer(project.secretKey));
  expect(contact.body.subscribed).toBe(false);
});

test("server errors surface with the server's message", async () => {
  const plunk = new Plunk(project.secretKey, { baseUrl });
  const unverified = { to: 'x@example.org', subject: 'S', body: 'B', from: 'me@not-ours.test' };
  const direct = await env.http().post('/v1/send').set(bearer(project.secretKey)).send(unverified);
  expect(direct.status).toBe(403);
  expect(direct.body.error.code).toBe('DOMAIN_NOT_VERIFIED');
  expect(direct.body.message).toBe(direct.body.error.message);
  expect(await thrown(plunk.emails.send(unverified))).toEqual({
    type: 'Error',
    message: 'The domain not-ours.test is not registered in this project',
  });

  // 401 and 404 become the client's own error classes, still with the server's message.
  expect(await thrown(new Plunk(`sk_${'0'.repeat(64)}`, { baseUrl }).events.track({ event: 'e', email: 'x@example.org' }))).toEqual({
    type: 'TokenError',
    message: 'The API key is not valid',
  });
  expect(await thrown(new Plunk(project.publicKey, { baseUrl }).emails.send({ ...unverified, from: `hello@${DOMAIN}` }))).toEqual({
    type: 'TokenError',
    message: 'A public key (pk_…) can only be used on POST /v1/track; use the secret key (sk_…)',
  });
  const noTemplate = { to: 'x@example.org', template: 'tpl_missing', from: `hello@${DOMAIN}` } as unknown as Parameters<typeof plunk.emails.send>[0];
  expect(await thrown(plunk.emails.send(noTemplate))).toEqual({ type: 'NotFoundError', message: 'Template not found' });

  const reserved = await thrown(plunk.events.track({ event: 'email.sent', email: 'x@example.org' }));
  expect(reserved.type).toBe('Error');
  expect(reserved.message).toBe('Request validation failed: event: Names starting with email., contact. or segment. are reserved for events the service emits');
  // Nothing was sent or stored by any refusal.
  const lookup = await env.http().post('/contacts/lookup').set(bearer(project.secretKey)).send({ emails: ['x@example.org'] });
  expect(lookup.body.found).toEqual([]);
});
