import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { simpleParser } from 'mailparser';
import request from 'supertest';
import { createApp } from '../../api/app';
import { SESSION_COOKIE } from '../../api/session';
import { createLogger } from '../../logger';
import { signContactToken } from '../../mail/links';
import { signClickToken, signOpenToken } from '../../mail/tracking';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { waitUntil } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/**
 * Everything the API logs during a realistic run — keyed requests, a whole session, account mail
 * links, subscription and tracking links — captured at debug level and searched for the
 * credentials that went over the wire.
 */
let env: TestEnv;
let smtp: SmtpSink;
beforeAll(async () => {
  smtp = await startSmtpSink();
  env = await startTestEnv({ SMTP_URL: smtp.url, SEND_RETRY_MAX_INTERVAL_SECONDS: '1', SYSTEM_EMAIL_FROM: 'accounts@tidings.test' });
  await env.startWorker();
});
afterAll(async () => {
  await env?.close();
  await smtp?.close();
});

function captureLogs() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const app = createApp({ ...env.deps, logger: createLogger({ logLevel: 'debug' }, stream) }).app;
  let requests = 0;
  return { http: () => (requests++, request.agent(app)), lines, requests: () => requests };
}

/** The link (path and query) in the account email to `to`. */
async function linkMailedTo(to: string, nth: number): Promise<{ path: string; token: string }> {
  const raw = await waitUntil(async () => smtp.messages.filter((m) => m.envelope.to.includes(to))[nth - 1]?.raw);
  const text = (await simpleParser(raw)).text ?? '';
  const url = new URL(/(http:\/\/\S+\?token=[\w-]+)/.exec(text)![1]!);
  return { path: url.pathname + url.search, token: url.searchParams.get('token')! };
}

const JWT = /eyJ[\w-]+\.[\w-]+\.[\w-]+/;

test('no key, session, password or link token reaches the log', async () => {
  const { http, lines, requests } = captureLogs();
  const email = `logs-${randomUUID().slice(0, 8)}@redaction.test`;
  const password = `pw-${randomUUID()}`;
  const newPassword = `new-pw-${randomUUID()}`;
  const secrets: string[] = [password, newPassword];

  // A session: signup (its cookie), login, project routes with the cookie and X-Project-Id, logout.
  const signup = await http().post('/auth/signup').send({ email, password });
  expect(signup.status).toBe(201);
  const welcome = await linkMailedTo(email, 1);
  secrets.push(welcome.token);
  const login = await http().post('/auth/login').send({ email, password });
  expect(login.status).toBe(200);
  const cookie = ([] as string[]).concat(login.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${SESSION_COOKIE}=`))!.split(';')[0]!;
  secrets.push(cookie.slice(SESSION_COOKIE.length + 1));
  const project = await http().post('/users/@me/projects').set('Cookie', cookie).send({ name: 'logged' });
  expect(project.status).toBe(201);
  const { id: projectId, secretKey, publicKey } = project.body as { id: string; secretKey: string; publicKey: string };
  secrets.push(secretKey, publicKey);
  expect((await http().get('/contacts').set({ Cookie: cookie, 'X-Project-Id': projectId })).status).toBe(200);

  // Keyed requests: contacts with the secret key, /v1/track with the public one.
  const created = await http().post('/contacts').set('Authorization', `Bearer ${secretKey}`).send({ email: 'ada@redaction.test' });
  expect(created.status).toBe(201);
  const contactId = (created.body as { id: string }).id;
  expect((await http().get(`/contacts/${contactId}`).set('Authorization', `Bearer ${secretKey}`)).status).toBe(200);
  expect((await http().post('/v1/track').set('Authorization', `Bearer ${publicKey}`).send({ email: 'ada@redaction.test', event: 'logged' })).status).toBe(200);
  expect((await http().get('/contacts').set('Authorization', `Bearer ${publicKey}`)).status).toBe(401);

  // Account mail links: verification, then a password reset used to set a new password.
  expect((await http().post('/auth/request-verification').set('Cookie', cookie)).status).toBe(202);
  // The mail links the dashboard, which posts the token; the server pages answer older links.
  const verify = await linkMailedTo(email, 2);
  expect(verify.path).toMatch(/^\/app\/verify\?token=/);
  expect((await http().get(`/auth/verify-email?token=${verify.token}`)).status).toBe(200);
  expect((await http().post('/auth/request-password-reset').send({ email })).status).toBe(202);
  const reset = await linkMailedTo(email, 3);
  expect(reset.path).toMatch(/^\/app\/reset\?token=/);
  expect((await http().get(`/auth/reset-password?token=${reset.token}`)).status).toBe(200);
  expect((await http().post('/auth/reset-password').send({ token: reset.token, password: newPassword })).status).toBe(200);
  secrets.push(verify.token, reset.token);
  const relogin = await http().post('/auth/login').send({ email, password: newPassword });
  const cookie2 = ([] as string[]).concat(relogin.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${SESSION_COOKIE}=`))!.split(';')[0]!;
  secrets.push(cookie2.slice(SESSION_COOKIE.length + 1));
  expect((await http().get('/auth/logout').set('Cookie', cookie2)).status).toBe(200);

  // Subscription and tracking links carry a signed token in the path; a click redirects to a URL
  // whose own query holds a credential of the site it points to.
  const contactToken = signContactToken(env.deps.linkSecret, contactId);
  const unknownEmail = randomUUID();
  const openToken = signOpenToken(env.deps.linkSecret, unknownEmail);
  const targetSecret = `magic-${randomUUID()}`;
  const clickToken = signClickToken(env.deps.linkSecret, unknownEmail, `https://shop.example/welcome?token=${targetSecret}`);
  secrets.push(contactToken, openToken, clickToken, targetSecret);
  expect((await http().get(`/unsubscribe/${contactToken}`)).status).toBe(200);
  expect((await http().get(`/manage/${contactToken}`)).status).toBe(200);
  expect((await http().get(`/t/o/${openToken}`)).status).toBe(200);
  expect((await http().get(`/t/c/${clickToken}`)).status).toBe(302);

  const output = lines.join('\n');
  // The run was logged: one line per request, with what an operator needs.
  const completed = lines.map((l) => JSON.parse(l) as { msg: string; req?: { url: string; method: string } }).filter((l) => l.msg === 'request completed');
  expect(completed).toHaveLength(requests());
  expect(completed.map((l) => l.req!.url)).toEqual(
    expect.arrayContaining(['/auth/verify-email?token=[REDACTED]', '/unsubscribe/[REDACTED]', '/t/c/[REDACTED]', `/contacts/${contactId}`]),
  );
  expect(output).toContain('"authorization":"[REDACTED]"');
  expect(output).toContain('"cookie":"[REDACTED]"');

  for (const secret of secrets) expect(output).not.toContain(secret);
  expect(output).not.toMatch(/\b[sp]k_[0-9a-f]/);
  expect(output).not.toMatch(JWT);
});
