import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { loadConfig } from '../../config';
import { addTestMember, asMember, createTestUser } from '../helpers/accounts';
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
let proxied: TestEnv;
let dataDir: string;
beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-outbox-'));
  outbox = await startTestEnv({ DATA_DIR: dataDir });
  await outbox.startWorker();
  // A relay nobody listens on: nothing is sent in that half, only the rule is checked.
  relay = await startTestEnv({ SMTP_URL: 'smtp://127.0.0.1:1' });
  // The operator says a proxy stands in front; the same folder, so only the refusal differs.
  proxied = await startTestEnv({ DATA_DIR: dataDir, TRUST_PROXY: 'loopback' });
});
afterAll(async () => {
  await outbox?.close();
  await relay?.close();
  await proxied?.close();
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

describe('the local /outbox pages refuse what came through a proxy', () => {
  const expectLocalOnly = (res: { status: number; body: { success?: boolean; error?: { code?: string; message?: string } } }, why: RegExp) => {
    expect(res.status).toBe(403);
    expect(res.body.success).toBe(false);
    expect(res.body.error?.code).toBe('OUTBOX_LOCAL_ONLY');
    expect(res.body.error?.message).toMatch(why);
  };

  test('a plain request on loopback is shown the pages', async () => {
    expect((await outbox.http().get('/outbox')).status).toBe(200);
  });

  test.each([
    ['X-Forwarded-For', '203.0.113.9'],
    ['Forwarded', 'for=203.0.113.9;proto=https'],
    ['X-Real-IP', '203.0.113.9'],
  ])('a request with a %s header gets 403 in the envelope, on the list and on a message', async (header, value) => {
    expectLocalOnly(await outbox.http().get('/outbox').set(header, value), /through a proxy/);
    expectLocalOnly(await outbox.http().get('/outbox/anything').set(header, value), /through a proxy/);
  });

  test('with TRUST_PROXY set by the operator, every request gets 403, and the landing page does not link the outbox', async () => {
    expect(loadConfig({}).trustProxySet).toBe(false);
    expect(loadConfig({}).trustProxy).toBe('loopback');
    expect(loadConfig({ TRUST_PROXY: '2' })).toMatchObject({ trustProxy: 2, trustProxySet: true });
    expectLocalOnly(await proxied.http().get('/outbox'), /TRUST_PROXY/);
    expectLocalOnly(await proxied.http().get('/outbox/anything'), /TRUST_PROXY/);
    expect((await proxied.http().get('/')).text).not.toContain('href="/outbox"');
  });
});

describe("a project's outbox (GET /projects/:id/outbox): its own mail only", () => {
  interface Summary {
    id: string;
    emailId: string;
    subject: string;
    to: string;
    from: string;
    dkim: string | null;
  }

  /** A project with a registered domain, a member, and `count` emails sent; their ids, oldest first. */
  async function sendingProject(name: string, domain: string, subjects: string[]) {
    const project = await outbox.project(name);
    const user = await createTestUser(outbox);
    await addTestMember(outbox, project.id, user.id, 'MEMBER');
    expect((await outbox.http().post('/domains').set(bearer(project.secretKey)).send({ domain })).status).toBe(201);
    const emailIds: string[] = [];
    for (const subject of subjects) {
      const sent = await outbox
        .http()
        .post('/v1/send')
        .set(bearer(project.secretKey))
        .send({ to: `ada@${domain}`, from: `hello@${domain}`, subject, body: `<p>${subject}</p>` });
      expect(sent.status).toBe(200);
      emailIds.push(sent.body.data.emails[0].email as string);
    }
    const dir = path.join(dataDir, 'outbox');
    await waitUntil(async () => emailIds.every((id) => readdirSync(dir).some((f) => f.includes(id))));
    return { project, user, emailIds };
  }

  test("lists the project's messages newest first, paged; another project's and account mail never show", async () => {
    const mine = await sendingProject('outbox: mine', 'mine-outbox.test', ['first', 'second', 'third']);
    const theirs = await sendingProject('outbox: theirs', 'theirs-outbox.test', ['not yours']);
    // Account mail (a sign-up's verification) lands in the same folder and belongs to no project.
    const signup = await outbox.http().post('/auth/signup').send({ email: `outbox-${Date.now()}@example.com`, password: 'long enough pw' });
    expect(signup.status).toBe(201);
    const dir = path.join(dataDir, 'outbox');
    await waitUntil(async () => readdirSync(dir).some((f) => f.startsWith('_sml_')));

    const first = await outbox.http().get(`/projects/${mine.project.id}/outbox`).query({ limit: 2 }).set(asMember(mine.user, mine.project.id));
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ hasMore: true, total: 3, cursor: expect.any(String) });
    const second = await outbox
      .http()
      .get(`/projects/${mine.project.id}/outbox`)
      .query({ limit: 2, cursor: first.body.cursor })
      .set(asMember(mine.user, mine.project.id));
    expect(second.body).toMatchObject({ hasMore: false, total: 0, cursor: null });
    const listed = [...first.body.data, ...second.body.data] as Summary[];
    expect(listed.map((m) => m.subject)).toEqual(['third', 'second', 'first']);
    expect(listed.map((m) => m.emailId)).toEqual([...mine.emailIds].reverse());
    expect(listed[0]).toMatchObject({ to: 'ada@mine-outbox.test', from: 'hello@mine-outbox.test', dkim: expect.stringMatching(/^d=mine-outbox\.test s=/) });

    // The project's secret key sees the same; the other project sees only its own.
    const byKey = await outbox.http().get(`/projects/${mine.project.id}/outbox`).set(bearer(mine.project.secretKey));
    expect((byKey.body.data as Summary[]).map((m) => m.subject)).toEqual(['third', 'second', 'first']);
    const other = await outbox.http().get(`/projects/${theirs.project.id}/outbox`).set(asMember(theirs.user, theirs.project.id));
    expect((other.body.data as Summary[]).map((m) => m.subject)).toEqual(['not yours']);

    // A member of one project cannot open the other's list, with its id or its key.
    expect((await outbox.http().get(`/projects/${theirs.project.id}/outbox`).set(asMember(mine.user, theirs.project.id))).status).toBe(403);
    expect((await outbox.http().get(`/projects/${theirs.project.id}/outbox`).set(bearer(mine.project.secretKey))).status).toBe(403);
  });

  test("one message with its HTML and headers; another project's message and account mail are 404", async () => {
    const mine = await sendingProject('outbox: message', 'message-outbox.test', ['Hello there']);
    const theirs = await sendingProject('outbox: other message', 'other-message-outbox.test', ['private']);
    const list = async (p: typeof mine) =>
      (await outbox.http().get(`/projects/${p.project.id}/outbox`).set(asMember(p.user, p.project.id))).body.data as Summary[];
    const [message] = await list(mine);
    const [foreign] = await list(theirs);

    const res = await outbox.http().get(`/projects/${mine.project.id}/outbox/${message!.id}`).set(asMember(mine.user, mine.project.id));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: message!.id,
      emailId: mine.emailIds[0],
      subject: 'Hello there',
      html: expect.stringContaining('<p>Hello there</p>'),
      attachments: [],
    });
    expect(res.body.headers).toEqual(expect.arrayContaining([{ name: 'subject', value: 'Hello there' }]));

    const notFound = (id: string) => outbox.http().get(`/projects/${mine.project.id}/outbox/${encodeURIComponent(id)}`).set(asMember(mine.user, mine.project.id));
    for (const id of [foreign!.id, readdirSync(path.join(dataDir, 'outbox')).find((f) => f.startsWith('_sml_'))!.slice(0, -4), 'no-such', '..%2F..%2Fetc%2Fpasswd']) {
      const answer = await notFound(id);
      expect({ id, status: answer.status, code: answer.body.error?.code }).toEqual({ id, status: 404, code: 'MESSAGE_NOT_FOUND' });
    }
  });

  test('a cursor that is not one is a 400; with a relay there is no outbox (404)', async () => {
    const project = await outbox.project('outbox: cursor');
    const bad = await outbox.http().get(`/projects/${project.id}/outbox`).query({ cursor: 'nonsense' }).set(bearer(project.secretKey));
    expect({ status: bad.status, code: bad.body.error.code }).toEqual({ status: 400, code: 'INVALID_CURSOR' });
    const forged = Buffer.from(JSON.stringify({ after: 'not a position' })).toString('base64url');
    const forgedRes = await outbox.http().get(`/projects/${project.id}/outbox`).query({ cursor: forged }).set(bearer(project.secretKey));
    expect(forgedRes.status).toBe(400);

    const relayProject = await relay.project('outbox: relay');
    const none = await relay.http().get(`/projects/${relayProject.id}/outbox`).set(bearer(relayProject.secretKey));
    expect({ status: none.status, code: none.body.error.code }).toEqual({ status: 404, code: 'OUTBOX_NOT_FOUND' });
  });
});
