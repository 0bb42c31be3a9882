import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { type Domain, waitUntil } from '../helpers/sending';

/**
 * Outbox mode (no SMTP_URL): a registered domain counts as verified for sending, the mail is
 * DKIM-signed with the domain's own key and written to DATA_DIR/outbox, and /outbox shows it.
 * With a relay configured, verification is required as before.
 */
jest.setTimeout(60_000);

let outbox: TestEnv;
let relay: TestEnv;
let dataDir: string;
beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-outbox-'));
  outbox = await startTestEnv({ DATA_DIR: dataDir });
  await outbox.startWorker();
  // A relay nobody listens on: nothing is sent in that half, only the rule is checked.
  relay = await startTestEnv({ SMTP_URL: 'smtp://127.0.0.1:1' });
});
afterAll(async () => {
  await outbox?.close();
  await relay?.close();
});

/** TXT answers from the records the API told the user to publish, as a DNS server would give them. */
const resolverFor = (domain: Domain) => async (name: string) => {
  const record = domain.records.find((r) => r.type === 'TXT' && r.name === name);
  if (!record) throw Object.assign(new Error(`no TXT ${name}`), { code: 'ENOTFOUND' });
  return [[record.value]];
};

test('a pending domain sends in outbox mode: DKIM-signed with its key, written to the outbox, shown rendered at /outbox', async () => {
  const project = await outbox.project('outbox mode');
  const added = await outbox.http().post('/domains').set(bearer(project.secretKey)).send({ domain: 'first-email.test' });
  expect(added.status).toBe(201);
  const domain = added.body as Domain & { sending: { allowed: boolean; reason: string } };
  expect(domain.status).toBe('pending');
  expect(domain.sending.allowed).toBe(true);
  expect(domain.sending.reason).toMatch(/Outbox mode/);

  const sent = await outbox
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: 'ada@example.com', from: 'hello@first-email.test', subject: 'First <email>', body: '<h1>Hello {{email}}</h1>' });
  expect(sent.status).toBe(200);
  expect(sent.body.data.outbox).toMatch(/nothing left this machine.*\/outbox$/);
  const emailId = sent.body.data.emails[0].email as string;

  const dir = path.join(dataDir, 'outbox');
  const file = await waitUntil(async () => readdirSync(dir).find((f) => f.includes(emailId)));
  const raw = readFileSync(path.join(dir, file));
  const dkim = await dkimVerify(raw, { resolver: resolverFor(domain) });
  expect(dkim.results[0]!.signingDomain).toBe('first-email.test');
  expect(dkim.results[0]!.status.result).toBe('pass');

  const list = await outbox.http().get('/outbox');
  expect(list.status).toBe(200);
  expect(list.type).toBe('text/html');
  const id = file.slice(0, -'.eml'.length);
  expect(list.text).toContain(`href="/outbox/${id}"`);
  expect(list.text).toContain('First &lt;email&gt;');
  expect(list.text).toMatch(/signed d=first-email\.test s=\w+/);

  const page = await outbox.http().get(`/outbox/${id}`);
  expect(page.status).toBe(200);
  // The HTML part, rendered for the contact, inside a sandboxed frame (escaped into srcdoc).
  expect(page.text).toContain('<iframe sandbox');
  expect(page.text).toContain('&lt;h1&gt;Hello ada@example.com&lt;/h1&gt;');
  expect(page.text).toContain('DKIM-signed (d=first-email.test');

  expect((await outbox.http().get('/outbox/no-such-message')).status).toBe(404);
  expect((await outbox.http().get('/outbox/..%2F..%2Fetc%2Fpasswd')).status).toBe(404);
});

test('an unregistered domain is refused in outbox mode too', async () => {
  const project = await outbox.project('outbox unregistered');
  const res = await outbox
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: 'ada@example.com', from: 'hello@nowhere-registered.test', subject: 's', body: 'b' });
  expect(res.status).toBe(403);
  expect(res.body.error.code).toBe('DOMAIN_NOT_VERIFIED');
});

test('with a relay configured, a pending domain cannot send and /outbox does not exist', async () => {
  const project = await relay.project('relay mode');
  const added = await relay.http().post('/domains').set(bearer(project.secretKey)).send({ domain: 'relay-pending.test' });
  expect(added.status).toBe(201);
  expect(added.body.sending).toEqual({ allowed: false, reason: expect.stringMatching(/Publish the DNS records/) });
  const res = await relay
    .http()
    .post('/v1/send')
    .set(bearer(project.secretKey))
    .send({ to: 'ada@example.com', from: 'hello@relay-pending.test', subject: 's', body: 'b' });
  expect(res.status).toBe(403);
  expect(res.body.error.code).toBe('DOMAIN_NOT_VERIFIED');
  expect(res.body.data?.outbox).toBeUndefined();
  expect((await relay.http().get('/outbox')).status).toBe(404);
});
