import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type request from 'supertest';
import { ConfigError, loadConfig } from '../../config';
import { queryOne } from '../../db/sql';
import { SESSION_COOKIE } from '../../api/session';
import { createTestUser } from '../helpers/accounts';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * Sign-in with GitHub and Google, against a local server that speaks both providers' OAuth 2
 * endpoints (authorize redirect, token exchange, user info) the way the real ones do.
 */

interface Identity {
  email: string;
  verified: boolean;
  name: string;
}

const CLIENT = { id: 'tidings-client', secret: 'tidings-secret' };
let provider: http.Server;
let providerUrl: string;
/** Who the next authorization at the fake provider signs in as. */
let next: Identity;
const codes = new Map<string, Identity>();
let issued = 0;
const tokens = new Map<string, Identity>();
let env: TestEnv;
let strict: TestEnv;

function startFakeProvider(): Promise<void> {
  provider = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const url = new URL(req.url!, 'http://fake');
      const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      const bearer = tokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
      if (url.pathname === '/login/oauth/authorize' || url.pathname === '/o/oauth2/v2/auth') {
        if (url.searchParams.get('client_id') !== CLIENT.id) return json(400, { error: 'unknown client' });
        const code = `code-${++issued}`;
        codes.set(code, next);
        const back = new URL(url.searchParams.get('redirect_uri')!);
        back.searchParams.set('code', code);
        back.searchParams.set('state', url.searchParams.get('state')!);
        return res.writeHead(302, { location: back.toString() }).end();
      }
      if (url.pathname === '/login/oauth/access_token' || url.pathname === '/token') {
        const form = url.pathname === '/token' ? Object.fromEntries(new URLSearchParams(body)) : (JSON.parse(body) as Record<string, string>);
        const who = codes.get(form.code ?? '');
        if (form.client_secret !== CLIENT.secret || !who) return json(url.pathname === '/token' ? 400 : 200, { error: 'bad_verification_code' });
        codes.delete(form.code!); // single use, as at the real providers
        const token = `token-${tokens.size + 1}`;
        tokens.set(token, who);
        return json(200, { access_token: token, token_type: 'bearer' });
      }
      if (!bearer) return json(401, { message: 'Bad credentials' });
      if (url.pathname === '/user') return json(200, { login: bearer.email.split('@')[0], name: bearer.name });
      if (url.pathname === '/user/emails') {
        return json(200, [
          { email: `other-${bearer.email}`, primary: false, verified: true },
          { email: bearer.email, primary: true, verified: bearer.verified },
        ]);
      }
      if (url.pathname === '/v1/userinfo') return json(200, { email: bearer.email, email_verified: bearer.verified, name: bearer.name });
      return json(404, { error: 'not found' });
    });
  });
  return new Promise((resolve) =>
    provider.listen(0, '127.0.0.1', () => {
      providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
      resolve();
    }),
  );
}

beforeAll(async () => {
  await startFakeProvider();
  const providers = {
    OAUTH_GITHUB_CLIENT_ID: CLIENT.id,
    OAUTH_GITHUB_CLIENT_SECRET: CLIENT.secret,
    OAUTH_GITHUB_URL: providerUrl,
    OAUTH_GOOGLE_CLIENT_ID: CLIENT.id,
    OAUTH_GOOGLE_CLIENT_SECRET: CLIENT.secret,
    OAUTH_GOOGLE_URL: providerUrl,
  };
  env = await startTestEnv(providers);
  // Sign-ups off, and only GitHub on.
  strict = await startTestEnv({
    DISABLE_SIGNUPS: 'true',
    OAUTH_GITHUB_CLIENT_ID: CLIENT.id,
    OAUTH_GITHUB_CLIENT_SECRET: CLIENT.secret,
    OAUTH_GITHUB_URL: providerUrl,
  });
}, 60_000);

afterAll(async () => {
  await env?.close();
  await strict?.close();
  provider?.close();
});

const pathOf = (location: string) => {
  const url = new URL(location);
  return url.pathname + url.search;
};

/** The browser's trip: our redirect, the provider's sign-in and redirect back, our callback. */
async function signIn(on: TestEnv, which: 'github' | 'google', as: Identity): Promise<{ agent: request.Agent; callback: request.Response }> {
  next = as;
  const agent = on.http();
  const start = await agent.get(`/auth/oauth/${which}`);
  expect(start.status).toBe(302);
  const atProvider = await fetch(start.headers.location!, { redirect: 'manual' });
  expect(atProvider.status).toBe(302);
  const callback = await agent.get(pathOf(atProvider.headers.get('location')!));
  return { agent, callback };
}

const sessionCookieOf = (res: request.Response) =>
  ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${SESSION_COOKIE}=`) && !c.startsWith(`${SESSION_COOKIE}=;`));

const userRow = (on: TestEnv, email: string) =>
  queryOne<{ id: string; name: string | null; verified: boolean }>(
    on.orm.em.fork(),
    'select id, name, email_verified_at is not null as verified from users where email = ?',
    [email],
  );

test('oauth-config and /config report the configured providers', async () => {
  expect((await env.http().get('/auth/oauth-config')).body).toEqual({ providers: ['github', 'google'], github: true, google: true });
  expect((await env.http().get('/config')).body.features.authProviders).toEqual({ github: true, google: true });
  expect((await strict.http().get('/auth/oauth-config')).body).toEqual({ providers: ['github'], github: true, google: false });
});

test('the redirect to the provider carries our client id, the callback URL and a state kept in an httpOnly cookie', async () => {
  const res = await env.http().get('/auth/oauth/github');
  expect(res.status).toBe(302);
  const url = new URL(res.headers.location!);
  expect(url.origin + url.pathname).toBe(`${providerUrl}/login/oauth/authorize`);
  expect(url.searchParams.get('client_id')).toBe(CLIENT.id);
  expect(url.searchParams.get('redirect_uri')).toBe('http://localhost:3000/auth/oauth/github/callback');
  const state = url.searchParams.get('state')!;
  expect(state.length).toBeGreaterThanOrEqual(32);
  const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('tidings_oauth_state='))!;
  expect(cookie).toContain(`tidings_oauth_state=github%3A${state}`);
  expect(cookie).toMatch(/HttpOnly/);
  expect(cookie).toMatch(/SameSite=Lax/);
  expect(cookie).toMatch(/Path=\/auth\/oauth/);
});

test('GitHub: a new verified email creates a verified account and signs it in; the next sign-in finds the same account', async () => {
  const who = { email: 'octo@example.org', verified: true, name: 'Octo Cat' };
  const first = await signIn(env, 'github', who);
  expect(first.callback.status).toBe(302);
  expect(first.callback.headers.location).toBe('http://localhost:3000/app/');
  const cookie = sessionCookieOf(first.callback)!;
  expect(cookie).toMatch(/HttpOnly/);
  const me = await env.http().get('/users/@me').set('Cookie', cookie.split(';')[0]!);
  expect(me.status).toBe(200);
  expect(me.body).toMatchObject({ email: who.email, name: 'Octo Cat', emailVerified: true });

  const again = await signIn(env, 'github', who);
  expect(again.callback.status).toBe(302);
  const me2 = await env.http().get('/users/@me').set('Cookie', sessionCookieOf(again.callback)!.split(';')[0]!);
  expect(me2.body.id).toBe(me.body.id);
});

test('Google: signs in the verified password account of the same email; its password keeps working', async () => {
  const user = await createTestUser(env, { email: 'has-password@example.org' });
  const { callback } = await signIn(env, 'google', { email: 'Has-Password@example.org', verified: true, name: 'Ignored' });
  expect(callback.status).toBe(302);
  const me = await env.http().get('/users/@me').set('Cookie', sessionCookieOf(callback)!.split(';')[0]!);
  expect(me.body).toMatchObject({ id: user.id, email: user.email, emailVerified: true });
  expect((await env.http().post('/auth/login').send({ email: user.email, password: user.password })).status).toBe(200);
  expect((await env.http().get('/users/@me').set('Cookie', user.cookie)).status).toBe(200);
});

test('an unverified account of that email (perhaps opened by someone else) is taken over: verified, its password and sessions void', async () => {
  const squatter = await createTestUser(env, { email: 'victim@example.org', verified: false });
  const { callback } = await signIn(env, 'google', { email: 'victim@example.org', verified: true, name: 'Victim' });
  expect(callback.status).toBe(302);
  const me = await env.http().get('/users/@me').set('Cookie', sessionCookieOf(callback)!.split(';')[0]!);
  expect(me.body).toMatchObject({ id: squatter.id, emailVerified: true });
  expect((await env.http().post('/auth/login').send({ email: squatter.email, password: squatter.password })).status).toBe(401);
  expect((await env.http().get('/users/@me').set('Cookie', squatter.cookie)).status).toBe(401);
});

test('an email the provider has not verified signs nobody in, and creates nothing', async () => {
  const { callback } = await signIn(env, 'github', { email: 'unverified@example.org', verified: false, name: 'U' });
  expect([callback.status, callback.body.error.code]).toEqual([403, 'OAUTH_EMAIL_UNVERIFIED']);
  expect(sessionCookieOf(callback)).toBeUndefined();
  expect(await userRow(env, 'unverified@example.org')).toBeUndefined();
});

test('a callback this browser did not start (no state cookie, another state, a replayed code) is refused', async () => {
  next = { email: 'csrf@example.org', verified: true, name: 'C' };
  const start = await env.http().get('/auth/oauth/github');
  const atProvider = await fetch(start.headers.location!, { redirect: 'manual' });
  const callbackPath = pathOf(atProvider.headers.get('location')!);
  // Another browser (no cookie) opens the callback: refused.
  const foreign = await env.http().get(callbackPath);
  expect([foreign.status, foreign.body.error.code]).toEqual([400, 'OAUTH_STATE_MISMATCH']);
  // This browser, with its cookie, but a different state: refused.
  const agent = env.http();
  await agent.get('/auth/oauth/github');
  const tampered = await agent.get(callbackPath);
  expect([tampered.status, tampered.body.error.code]).toEqual([400, 'OAUTH_STATE_MISMATCH']);
  expect(await userRow(env, 'csrf@example.org')).toBeUndefined();

  // A code already spent is refused by the provider: 502, nothing written.
  const { agent: a2, callback } = await signIn(env, 'github', { email: 'replay@example.org', verified: true, name: 'R' });
  expect(callback.status).toBe(302);
  const replayStart = await a2.get('/auth/oauth/github');
  const state = new URL(replayStart.headers.location!).searchParams.get('state')!;
  const replayed = await a2.get(`/auth/oauth/github/callback?code=code-1&state=${state}`);
  expect([replayed.status, replayed.body.error.code]).toEqual([502, 'OAUTH_PROVIDER_ERROR']);
});

test('a user who declines at the provider gets 400 OAUTH_DENIED', async () => {
  const agent = env.http();
  const start = await agent.get('/auth/oauth/google');
  const state = new URL(start.headers.location!).searchParams.get('state')!;
  const res = await agent.get(`/auth/oauth/google/callback?error=access_denied&state=${state}`);
  expect([res.status, res.body.error.code]).toEqual([400, 'OAUTH_DENIED']);
});

test('with sign-ups disabled, only existing accounts sign in; a provider that is not configured answers 404', async () => {
  const refused = await signIn(strict, 'github', { email: 'newcomer@example.org', verified: true, name: 'N' });
  expect([refused.callback.status, refused.callback.body.error.code]).toEqual([403, 'SIGNUPS_DISABLED']);
  expect(await userRow(strict, 'newcomer@example.org')).toBeUndefined();

  const member = await createTestUser(strict, { email: 'existing-strict@example.org' });
  const allowed = await signIn(strict, 'github', { email: member.email, verified: true, name: 'E' });
  expect(allowed.callback.status).toBe(302);

  for (const path of ['/auth/oauth/google', '/auth/oauth/google/callback?code=x&state=y']) {
    const res = await strict.http().get(path);
    expect([res.status, res.body.error.code]).toEqual([404, 'OAUTH_PROVIDER_NOT_CONFIGURED']);
  }
  const unknown = await strict.http().get('/auth/oauth/myspace');
  expect(unknown.status).toBe(422);
});

test('a client id without its secret (or the reverse) is a configuration error, not a provider half on', () => {
  expect(() => loadConfig({ OAUTH_GITHUB_CLIENT_ID: CLIENT.id })).toThrow(/OAUTH_GITHUB_CLIENT_ID and OAUTH_GITHUB_CLIENT_SECRET are set together/);
  expect(() => loadConfig({ OAUTH_GOOGLE_CLIENT_SECRET: CLIENT.secret })).toThrow(ConfigError);
  expect(loadConfig({}).oauth).toEqual({ github: undefined, google: undefined });
});
