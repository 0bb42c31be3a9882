import { createHash, randomInt, randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import type { Response } from 'supertest';
import { isSessionRevoked, pruneRevokedSessions, revokeSession } from '../../db/accounts/revoked-sessions';
import { MockActivityEnvironment } from '@temporalio/testing';
import { query, queryOne } from '../../db/sql';
import { insertSystemEmail } from '../../db/accounts/system-emails';
import { createSmtpMailer } from '../../mail/transport';
import { createSystemEmailActivities } from '../../temporal/system-email/activities';
import { SESSION_COOKIE } from '../../api/session';
import { workflowIds } from '../../temporal/ids';
import { addTestMember, asMember, createTestUser } from '../helpers/accounts';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { waitUntil } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/**
 * The account endpoints over the real stack: the API, Temporal, a worker whose mailer talks to an
 * SMTP sink. Every test uses its own email addresses, and its own client IP (X-Forwarded-For; the
 * app trusts the proxy header), so the login rate limits of one test never count another's attempts.
 */
const LOGIN_LIMIT = 3;
const FROM = 'accounts@tidings.test';

let env: TestEnv;
let smtp: SmtpSink;
/** The API's clock runs with real time, ahead of it by this much (freshWindow). */
let clockOffset = 0;
beforeAll(async () => {
  smtp = await startSmtpSink();
  env = await startTestEnv({
    SMTP_URL: smtp.url,
    SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
    SYSTEM_EMAIL_FROM: `Tidings Accounts <${FROM}>`,
    LOGIN_ATTEMPTS_PER_MINUTE: String(LOGIN_LIMIT),
    VERIFY_TOKEN_TTL_MINUTES: '1',
    RESET_TOKEN_TTL_MINUTES: '30',
  }, { clock: () => new Date(Date.now() + clockOffset) });
  await env.startWorker();
});
afterAll(async () => {
  await env?.close();
  await smtp?.close();
});

const newEmail = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}@auth.test`;
const newIp = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;

function signup(body: object, ip = newIp()) {
  return env.http().post('/auth/signup').set('X-Forwarded-For', ip).send(body);
}
function requestReset(body: object, ip = newIp()) {
  return env.http().post('/auth/request-password-reset').set('X-Forwarded-For', ip).send(body);
}
function login(email: string, password: string, ip = newIp(), on = env) {
  return on.http().post('/auth/login').set('X-Forwarded-For', ip).send({ email, password });
}

/** The session cookie of a response, as `name=value` for a Cookie header, and its attributes. */
function sessionCookie(res: Response): { cookie: string; attributes: string[] } {
  const header = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${SESSION_COOKIE}=`));
  expect(header).toBeDefined();
  const [pair, ...attributes] = header!.split(';').map((p) => p.trim());
  return { cookie: pair!, attributes };
}

interface AccountMail {
  from: string;
  subject: string;
  text: string;
  html: string;
  messageId: string;
  /** The link in the mail, as a path for the test client. */
  path: string;
  token: string;
}

/** Waits for the account email to `to` (the `nth` one, counting from 1) and reads its link. */
async function mailTo(to: string, nth = 1): Promise<AccountMail> {
  const raw = await waitUntil(async () => smtp.messages.filter((m) => m.envelope.to.includes(to))[nth - 1]?.raw);
  const parsed = await simpleParser(raw);
  const text = parsed.text ?? '';
  const link = /(http:\/\/\S+\?token=[A-Za-z0-9_-]+)/.exec(text)?.[1];
  expect(link).toBeDefined();
  const url = new URL(link!);
  expect(url.origin).toBe('http://localhost:3000');
  expect(String(parsed.html)).toContain(link);
  return {
    from: parsed.from!.value[0]!.address!,
    subject: parsed.subject ?? '',
    text,
    html: String(parsed.html),
    messageId: parsed.messageId ?? '',
    path: url.pathname + url.search,
    token: url.searchParams.get('token')!,
  };
}

const userRow = (email: string) =>
  queryOne<{ id: string; verified: boolean; session_version: number }>(
    env.orm.em.fork(),
    `select id, email_verified_at is not null as verified, session_version from users where email = ?`,
    [email],
  );

/** An error envelope without what differs per request. */
const comparable = (res: Response) => {
  const { requestId, ...error } = res.body.error;
  expect(requestId).toEqual(expect.any(String));
  return { status: res.status, message: res.body.message, error, setCookie: res.headers['set-cookie'] };
};

function expectError(res: Response, status: number, code: string): void {
  expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
  expect(res.body.success).toBe(false);
  expect(res.body.error.suggestion).toEqual(expect.any(String));
}

/** Moves the API's clock to one second into the next minute: a login window no attempt has counted in. */
function freshWindow(): void {
  const at = Date.now() + clockOffset;
  clockOffset += 60_000 - (at % 60_000) + 1_000;
}

describe('signup', () => {
  test('201 with the user (never the hash), a session cookie with its flags, and a verification email', async () => {
    const email = newEmail('ada');
    const res = await signup({ email: `  ${email.toUpperCase()} `, password: 'long enough pw', name: 'Ada' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      user: { id: expect.stringMatching(/^usr_/), email, name: 'Ada', emailVerified: false, createdAt: expect.any(String) },
    });
    expect(JSON.stringify(res.body)).not.toMatch(/scrypt|password/i);

    const { cookie, attributes } = sessionCookie(res);
    expect(attributes).toEqual(expect.arrayContaining(['Max-Age=604800', 'Path=/', 'HttpOnly', 'SameSite=Lax']));
    expect(attributes.some((a) => a.toLowerCase() === 'secure')).toBe(false);

    // The cookie is a working session: a project the user belongs to answers, another one refuses.
    const mine = await env.project('auth: member');
    const other = await env.project('auth: not a member');
    await addTestMember(env, mine.id, res.body.user.id, 'MEMBER');
    expect((await env.http().get('/contacts').set({ Cookie: cookie, 'X-Project-Id': mine.id })).status).toBe(200);
    expectError(await env.http().get('/contacts').set({ Cookie: cookie, 'X-Project-Id': other.id }), 403, 'PROJECT_ACCESS_DENIED');

    const mail = await mailTo(email);
    expect(mail.from).toBe(FROM);
    expect(mail.subject).toBe('Confirm your email address');
    expect(mail.path).toMatch(/^\/app\/verify\?token=[A-Za-z0-9_-]{43}$/);
    expect(mail.text).toContain('expires in 1 minute');
    expect(mail.messageId).toMatch(/^<sml_[0-9a-f]{32}@tidings\.test>$/);
  });

  test('the token exists only in the email: the database keeps its SHA-256, bodies are blanked once sent, Temporal never sees it', async () => {
    const email = newEmail('hashed');
    expect((await signup({ email, password: 'long enough pw' })).status).toBe(201);
    const mail = await mailTo(email);
    const em = env.orm.em.fork();
    const tokens = await query<{ token_hash: string; purpose: string }>(
      em,
      `select token_hash, purpose from user_tokens t join users u on u.id = t.user_id where u.email = ?`,
      [email],
    );
    expect(tokens).toEqual([{ token_hash: createHash('sha256').update(mail.token).digest('hex'), purpose: 'verify-email' }]);
    const id = /^<(sml_[0-9a-f]+)@/.exec(mail.messageId)![1]!;
    const row = await waitUntil(() =>
      queryOne<{ text_body: string; html_body: string; sent_at: Date | null }>(
        em,
        `select text_body, html_body, sent_at from system_emails where id = ? and sent_at is not null`,
        [id],
      ),
    );
    expect(row).toMatchObject({ text_body: '', html_body: '' });
    const history = await env.temporal.client.workflow.getHandle(workflowIds.systemEmail(id)).fetchHistory();
    expect(JSON.stringify(history).length).toBeGreaterThan(100);
    expect(JSON.stringify(history)).not.toContain(mail.token);
  });

  test('an email already used gets 409, in any letter case', async () => {
    const email = newEmail('twice');
    expect((await signup({ email, password: 'long enough pw' })).status).toBe(201);
    const again = await signup({ email: email.toUpperCase(), password: 'another password' });
    expectError(again, 409, 'EMAIL_ALREADY_REGISTERED');
    expect(again.headers['set-cookie']).toBeUndefined();
  });

  test('DISABLE_SIGNUPS=true refuses with 403 SIGNUPS_DISABLED and creates nothing', async () => {
    const closed = await startTestEnv({ DISABLE_SIGNUPS: 'true' });
    try {
      const email = newEmail('closed');
      const res = await closed.http().post('/auth/signup').send({ email, password: 'long enough pw' });
      expectError(res, 403, 'SIGNUPS_DISABLED');
      expect(res.headers['set-cookie']).toBeUndefined();
      expect(await userRow(email)).toBeUndefined();
      expect((await closed.http().get('/config')).body.features.signups).toEqual({ enabled: false });
    } finally {
      await closed.close();
    }
  });

  test('bad bodies get 422 VALIDATION_ERROR naming the field', async () => {
    const cases: [object, string][] = [
      [{ email: newEmail('short'), password: 'seven77' }, 'password'],
      [{ email: newEmail('long'), password: 'x'.repeat(201) }, 'password'],
      [{ email: 'not-an-email', password: 'long enough pw' }, 'email'],
      [{ password: 'long enough pw' }, 'email'],
      [{ email: newEmail('noname'), password: 'long enough pw', name: '' }, 'name'],
    ];
    for (const [body, field] of cases) {
      const res = await signup(body);
      expectError(res, 422, 'VALIDATION_ERROR');
      expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
  });
});

describe('login and logout', () => {
  test('the right password answers 200 with the user and a session that works', async () => {
    const user = await createTestUser(env);
    const project = await env.project('auth: login');
    await addTestMember(env, project.id, user.id, 'ADMIN');
    const res = await login(user.email.toUpperCase(), user.password);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      user: { id: user.id, email: user.email, name: null, emailVerified: true, createdAt: expect.any(String) },
    });
    const { cookie, attributes } = sessionCookie(res);
    expect(attributes).toEqual(expect.arrayContaining(['Max-Age=604800', 'Path=/', 'HttpOnly', 'SameSite=Lax']));
    expect((await env.http().get('/contacts').set({ Cookie: cookie, 'X-Project-Id': project.id })).status).toBe(200);
  });

  test('an unknown email and a wrong password answer identically: 401 INVALID_CREDENTIALS, no cookie', async () => {
    const user = await createTestUser(env);
    const wrong = await login(user.email, 'not the password');
    const unknown = await login(newEmail('nobody'), 'not the password');
    expectError(wrong, 401, 'INVALID_CREDENTIALS');
    expect(comparable(unknown)).toEqual(comparable(wrong));
    expect(wrong.headers['set-cookie']).toBeUndefined();
  });

  test('an unknown email costs a password hash too (decoy), so timing does not tell it apart', async () => {
    const timed = async (attempt: () => Promise<Response>) => {
      const started = process.hrtime.bigint();
      expect((await attempt()).status).toBe(401);
      return Number(process.hrtime.bigint() - started) / 1e6;
    };
    const users = [await createTestUser(env), await createTestUser(env)];
    const wrong = Math.min(...[await timed(() => login(users[0]!.email, 'nope')), await timed(() => login(users[1]!.email, 'nope'))]);
    const unknown = Math.min(...[await timed(() => login(newEmail('u1'), 'nope')), await timed(() => login(newEmail('u2'), 'nope'))]);
    // scrypt (32 MiB) dominates both; without the decoy an unknown email answers an order of magnitude sooner.
    expect(unknown).toBeGreaterThan(wrong * 0.4);
  });

  test('Secure is added to the cookie when PUBLIC_URL is https', async () => {
    const https = await startTestEnv({ PUBLIC_URL: 'https://tidings.example.com' });
    try {
      const user = await createTestUser(env);
      const res = await login(user.email, user.password, newIp(), https);
      expect(res.status).toBe(200);
      expect(sessionCookie(res).attributes).toEqual(expect.arrayContaining(['Secure', 'HttpOnly', 'SameSite=Lax', 'Max-Age=604800']));
    } finally {
      await https.close();
    }
  });

  test('logins are limited per account: the 4th attempt in a minute gets 429, from any IP, even with the right password', async () => {
    const user = await createTestUser(env);
    freshWindow();
    for (let i = 1; i <= LOGIN_LIMIT; i++) expectError(await login(user.email, 'wrong password', newIp()), 401, 'INVALID_CREDENTIALS');
    const limited = await login(user.email, user.password, newIp());
    expectError(limited, 429, 'RATE_LIMIT_EXCEEDED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.headers['set-cookie']).toBeUndefined();
    // Other accounts are not affected.
    const other = await createTestUser(env);
    expect((await login(other.email, other.password)).status).toBe(200);
  });

  test('logins are limited per IP: after 3 attempts on any accounts, a 4th from that IP gets 429', async () => {
    const user = await createTestUser(env);
    const ip = newIp();
    freshWindow();
    for (let i = 1; i <= LOGIN_LIMIT; i++) expectError(await login(newEmail(`guess${i}`), 'guess', ip), 401, 'INVALID_CREDENTIALS');
    const limited = await login(user.email, user.password, ip);
    expectError(limited, 429, 'RATE_LIMIT_EXCEEDED');
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    // The same account from another address still signs in.
    expect((await login(user.email, user.password, newIp())).status).toBe(200);
  });

  test('sign-ups are limited per IP: a 4th from one address within the minute gets 429 and creates nothing', async () => {
    const ip = newIp();
    freshWindow();
    for (let i = 1; i <= LOGIN_LIMIT; i++) expect((await signup({ email: newEmail(`burst${i}`), password: 'a long password' }, ip)).status).toBe(201);
    const email = newEmail('burst-over');
    expectError(await signup({ email, password: 'a long password' }, ip), 429, 'RATE_LIMIT_EXCEEDED');
    expect(await query(env.orm.em.fork(), 'select 1 from users where email = ?', [email])).toHaveLength(0);
    expect((await signup({ email, password: 'a long password' })).status).toBe(201);
  });

  test('bad login bodies get 422', async () => {
    expectError(await env.http().post('/auth/login').send({ email: newEmail('x') }), 422, 'VALIDATION_ERROR');
    expectError(await env.http().post('/auth/login').send({ email: 'nope', password: 'whatever' }), 422, 'VALIDATION_ERROR');
  });

  test('GET /auth/logout clears the cookie with the same attributes', async () => {
    const res = await env.http().get('/auth/logout');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, message: expect.any(String) });
    const { cookie, attributes } = sessionCookie(res);
    expect(cookie).toBe(`${SESSION_COOKIE}=`);
    expect(attributes).toEqual(expect.arrayContaining(['Path=/', 'HttpOnly', 'SameSite=Lax']));
    const expires = attributes.find((a) => a.startsWith('Expires='));
    expect(Date.parse(expires!.slice('Expires='.length))).toBeLessThan(Date.now());
  });

  test("logout ends that session everywhere (a copied cookie too); the user's other sessions keep working", async () => {
    const user = await createTestUser(env);
    const [a, b] = [sessionCookie(await login(user.email, user.password)).cookie, sessionCookie(await login(user.email, user.password)).cookie];
    const me = (cookie: string) => env.http().get('/users/@me').set('Cookie', cookie);
    expect((await me(a)).status).toBe(200);

    expect((await env.http().get('/auth/logout').set('Cookie', a)).status).toBe(200);
    // The browser dropped the cookie; a copy of it (another tab, a stolen one) is refused too.
    expectError(await me(a), 401, 'INVALID_SESSION');
    expect((await me(b)).status).toBe(200);
    // Logging out again with it, or with no session at all, still answers 200.
    expect((await env.http().get('/auth/logout').set('Cookie', a)).status).toBe(200);
    expect((await env.http().get('/auth/logout').set('Cookie', `${SESSION_COOKIE}=garbage`)).status).toBe(200);
  });

  test('revoked sessions are forgotten once they would have expired anyway', async () => {
    const em = env.orm.em.fork();
    const [expired, current] = [randomUUID(), randomUUID()];
    await revokeSession(em, expired, new Date(Date.now() - 1000));
    await revokeSession(em, current, new Date(Date.now() + 3600_000));
    await pruneRevokedSessions(em);
    expect(await isSessionRevoked(em, expired)).toBe(false);
    expect(await isSessionRevoked(em, current)).toBe(true);
  });

  test('GET /auth/oauth-config lists no provider, as /config says', async () => {
    const res = await env.http().get('/auth/oauth-config');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ providers: [], github: false, google: false });
    const config = await env.http().get('/config');
    expect(config.body.features.authProviders).toEqual({ github: res.body.github, google: res.body.google });
  });
});

test('account mail is recorded sent inside the delivery attempt: a retried attempt mails nobody twice', async () => {
  const id = await insertSystemEmail(env.orm.em.fork(), { to: 'retry-mail@auth.test', subject: 'Verify', text: 'link', html: '<p>link</p>' });
  const mailer = createSmtpMailer(smtp.url);
  try {
    const { deliverSystemEmail } = createSystemEmailActivities({ orm: env.orm, mailer, config: env.deps.config });
    expect(await new MockActivityEnvironment().run(deliverSystemEmail, id)).toEqual({ delivered: true, recorded: true });
    const row = await queryOne<{ sent_at: Date | null; text_body: string }>(env.orm.em.fork(), 'select sent_at, text_body from system_emails where id = ?', [id]);
    expect(row!.sent_at).not.toBeNull();
    expect(row!.text_body).toBe('');
    // The completion never reached Temporal (the worker died): the retry finds it sent.
    expect(await new MockActivityEnvironment({ attempt: 2 }).run(deliverSystemEmail, id)).toEqual({ delivered: false });
    expect(smtp.messages.filter((m) => m.envelope.to.includes('retry-mail@auth.test'))).toHaveLength(1);
  } finally {
    mailer.close();
  }
});

describe('email verification', () => {
  test('the server page of the link (GET, for links mailed before they opened the dashboard) confirms the address; the same link then fails', async () => {
    const email = newEmail('verify');
    expect((await signup({ email, password: 'long enough pw' })).status).toBe(201);
    const mail = await mailTo(email);
    const page = `/auth/verify-email?token=${mail.token}`;
    const first = await env.http().get(page);
    expect(first.status).toBe(200);
    expect(first.headers['content-type']).toMatch(/text\/html/);
    expect(first.text).toContain(email);
    expect(await userRow(email)).toMatchObject({ verified: true });

    const again = await env.http().get(page);
    expect(again.status).toBe(400);
    expect(again.text).toContain('not valid');
    expectError(await env.http().post('/auth/verify-email').send({ token: mail.token }), 400, 'INVALID_TOKEN');
  });

  test('request-verification (signed in) mails a new token; POST /auth/verify-email spends it once; the older link stops working', async () => {
    const user = await createTestUser(env, { verified: false });
    const ask = () => env.http().post('/auth/request-verification').set({ Cookie: user.cookie, 'X-Forwarded-For': newIp() });
    const res = await ask();
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ success: true, message: expect.stringContaining(user.email) });
    const older = await mailTo(user.email, 1);
    expect((await ask()).status).toBe(202);
    const newer = await mailTo(user.email, 2);
    expect(newer.token).not.toBe(older.token);

    expectError(await env.http().post('/auth/verify-email').send({ token: older.token }), 400, 'INVALID_TOKEN');
    const ok = await env.http().post('/auth/verify-email').send({ token: newer.token });
    expect(ok.status).toBe(200);
    expect(ok.body.user).toMatchObject({ id: user.id, emailVerified: true });
    const reused = await env.http().post('/auth/verify-email').send({ token: newer.token });
    expectError(reused, 400, 'INVALID_TOKEN');
    expect(reused.body.message).toMatch(/expired|already used/);

    // Verified (the cookie's user is read afresh on each request): nothing more to send.
    expectError(await ask(), 409, 'EMAIL_ALREADY_VERIFIED');
  });

  test('request-verification needs a session', async () => {
    expectError(await env.http().post('/auth/request-verification'), 401, 'MISSING_AUTH');
  });

  test('an expired token is refused', async () => {
    const user = await createTestUser(env, { verified: false });
    expect((await env.http().post('/auth/request-verification').set({ Cookie: user.cookie, 'X-Forwarded-For': newIp() })).status).toBe(202);
    const mail = await mailTo(user.email);
    const em = env.orm.em.fork();
    const row = await queryOne<{ ttl: number }>(
      em,
      `select extract(epoch from expires_at - created_at)::int as ttl from user_tokens where token_hash = ?`,
      [createHash('sha256').update(mail.token).digest('hex')],
    );
    expect(row).toEqual({ ttl: 60 });
    await query(em, `update user_tokens set expires_at = now() - interval '1 second' where user_id = ?`, [user.id]);
    expectError(await env.http().post('/auth/verify-email').send({ token: mail.token }), 400, 'INVALID_TOKEN');
    expect(await userRow(user.email)).toMatchObject({ verified: false });
  });

  test('verify-email without a usable token gets 422', async () => {
    expectError(await env.http().post('/auth/verify-email').send({}), 422, 'VALIDATION_ERROR');
    expectError(await env.http().post('/auth/verify-email').send({ token: 'short' }), 422, 'VALIDATION_ERROR');
    expectError(await env.http().get('/auth/verify-email'), 422, 'VALIDATION_ERROR');
  });
});

describe('password reset', () => {
  test('the emailed token sets a new password; the old password and every older session stop working; reuse fails', async () => {
    const user = await createTestUser(env);
    const project = await env.project('auth: reset');
    await addTestMember(env, project.id, user.id, 'MEMBER');
    expect((await env.http().get('/contacts').set(asMember(user, project.id))).status).toBe(200);

    const asked = await requestReset({ email: user.email.toUpperCase() });
    expect(asked.status).toBe(202);
    const mail = await mailTo(user.email);
    expect(mail.subject).toBe('Reset your password');
    expect(mail.path).toMatch(/^\/app\/reset\?token=/);
    expect(mail.text).toContain('expires in 30 minutes');

    // The server page of the link shows the form and spends nothing.
    const form = await env.http().get(`/auth/reset-password?token=${mail.token}`);
    expect(form.status).toBe(200);
    expect(form.headers['content-type']).toMatch(/text\/html/);
    expect(form.text).toContain(`data-token="${mail.token}"`);

    const newPassword = 'a brand new password';
    const reset = await env.http().post('/auth/reset-password').send({ token: mail.token, password: newPassword });
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ success: true, message: expect.any(String) });
    expect(await userRow(user.email)).toMatchObject({ session_version: 2 });

    expectError(await login(user.email, user.password), 401, 'INVALID_CREDENTIALS');
    const fresh = await login(user.email, newPassword);
    expect(fresh.status).toBe(200);
    expectError(await env.http().get('/contacts').set(asMember(user, project.id)), 401, 'INVALID_SESSION');
    const { cookie } = sessionCookie(fresh);
    expect((await env.http().get('/contacts').set({ Cookie: cookie, 'X-Project-Id': project.id })).status).toBe(200);

    expectError(await env.http().post('/auth/reset-password').send({ token: mail.token, password: 'yet another one' }), 400, 'INVALID_TOKEN');
  });

  test('an unknown email gets the very same answer, and no email is written or sent', async () => {
    const known = await createTestUser(env);
    const unknown = newEmail('ghost');
    const a = await requestReset({ email: unknown });
    const b = await requestReset({ email: known.email });
    expect({ status: a.status, body: a.body }).toEqual({ status: b.status, body: b.body });
    expect(a.status).toBe(202);
    await mailTo(known.email);
    const rows = await query(env.orm.em.fork(), `select id from system_emails where to_email = ?`, [unknown]);
    expect(rows).toEqual([]);
    expect(smtp.messages.some((m) => m.envelope.to.includes(unknown))).toBe(false);
  });

  test('reset requests are limited per address (known or not) and per IP: the 4th in a minute gets 429', async () => {
    const known = await createTestUser(env);
    const unknown = newEmail('ghost');
    freshWindow();
    for (const email of [known.email, unknown]) {
      for (let i = 1; i <= LOGIN_LIMIT; i++) expect((await requestReset({ email })).status).toBe(202);
      const limited = await requestReset({ email });
      expectError(limited, 429, 'RATE_LIMIT_EXCEEDED');
      expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    }
    await mailTo(known.email, LOGIN_LIMIT);
    const written = await query(env.orm.em.fork(), `select id from system_emails where to_email = ?`, [known.email]);
    expect(written).toHaveLength(LOGIN_LIMIT);
    const ip = newIp();
    for (let i = 1; i <= LOGIN_LIMIT; i++) expect((await requestReset({ email: newEmail(`spray${i}`) }, ip)).status).toBe(202);
    expectError(await requestReset({ email: newEmail('spray') }, ip), 429, 'RATE_LIMIT_EXCEEDED');
  });

  test('bad reset bodies get 422; a wrong token 400', async () => {
    expectError(await requestReset({ email: 'nope' }), 422, 'VALIDATION_ERROR');
    const short = await env.http().post('/auth/reset-password').send({ token: 'x'.repeat(43), password: 'short' });
    expectError(short, 422, 'VALIDATION_ERROR');
    expect(short.body.error.errors).toEqual([expect.objectContaining({ field: 'password' })]);
    expectError(await env.http().post('/auth/reset-password').send({ token: 'x'.repeat(43), password: 'long enough pw' }), 400, 'INVALID_TOKEN');
  });
});
