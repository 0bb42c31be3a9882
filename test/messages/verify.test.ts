import { domainToASCII } from 'node:url';
import express, { type Express } from 'express';
import { requestLog } from '../../api/middleware/request-log';
import request from 'supertest';
import { authenticate, requestScope } from '../../api/middleware/auth';
import { errorHandler, notFoundHandler } from '../../api/middleware/errors';
import { rateLimit } from '../../api/middleware/rate-limit';
import { registerVerifyRoutes } from '../../api/routes/verify';
import { RouteRegistry } from '../../api/routing';
import { createDnsLookup, type DnsLookup } from '../../mail/dns';
import { verifyEmailAddress, type VerifyResult } from '../../mail/verify-address';
import { startDnsServer, type DnsServer } from '../helpers/dns';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * POST /v1/verify and verifyEmailAddress against a real DNS server on loopback (test/helpers/dns):
 * every record below is served by it, and the resolver asks nothing else.
 */

let server: DnsServer;
let dns: DnsLookup;

/** A domain that receives mail and has a website: MX, NS, A (and www). */
function mailDomain(domain: string): void {
  server.set(domain, 'MX', [{ exchange: `mx1.${domain}`, priority: 10 }]);
  server.set(domain, 'NS', [`ns1.${domain}`]);
  server.set(domain, 'A', ['192.0.2.10']);
  server.set(`www.${domain}`, 'A', ['192.0.2.10']);
}

const verify = (email: string, dnsLookup: DnsLookup = dns) => verifyEmailAddress(email, { dns: dnsLookup });

/** The fields a plain good address has; tests override what they are about. */
const good = (email: string): VerifyResult => ({
  email,
  valid: true,
  isDisposable: false,
  isAlias: false,
  isTypo: false,
  isPlusAddressed: false,
  isPersonalEmail: false,
  domainExists: true,
  hasWebsite: true,
  hasMxRecords: true,
  reasons: [],
  suggestion: null,
});

const LONG_DOMAIN = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(57)}.com`; // 189 characters
const IDN_DOMAIN = 'bücher-verify.de';

beforeAll(async () => {
  server = await startDnsServer();
  dns = createDnsLookup({ servers: [server.address], timeoutMs: 1000, tries: 1 });

  mailDomain('acme-verify.com');
  mailDomain('acme-verify.pt');
  mailDomain(LONG_DOMAIN);
  mailDomain(domainToASCII(IDN_DOMAIN));
  // A website but no mail.
  server.set('no-mx-verify.com', 'NS', ['ns1.no-mx-verify.com']);
  server.set('no-mx-verify.com', 'A', ['192.0.2.20']);
  // "This domain accepts no mail" (RFC 7505): a single MX of "." at preference 0.
  server.set('null-mx-verify.com', 'MX', [{ exchange: '.', priority: 0 }]);
  server.set('null-mx-verify.com', 'A', ['192.0.2.30']);
  // Mail only, no A/AAAA for the domain nor www: no website.
  server.set('mail-only-verify.com', 'MX', [{ exchange: 'mx.elsewhere-verify.net', priority: 10 }]);
  // Website on www only, over IPv6.
  server.set('www-only-verify.com', 'MX', [{ exchange: 'mx.elsewhere-verify.net', priority: 10 }]);
  server.set('www.www-only-verify.com', 'AAAA', ['2001:db8::1']);
  // Lists decide these; their DNS looks like any good domain's so only the list can make a difference.
  mailDomain('mailinator.com'); // disposable-email-domains
  mailDomain('sub.33mail.com'); // disposable-email-domains/wildcard: every subdomain of 33mail.com
  mailDomain('gmail.com'); // free-email-domains
  mailDomain('0815.ru'); // in free-email-domains, but also a disposable domain
  mailDomain('gmial.com'); // typo of gmail.com; typo domains are often registered and receive mail
  mailDomain('gmx.net'); // the spell checker's fuzzy match calls it a typo of cox.net
  mailDomain('privaterelay.appleid.com');
  mailDomain('mozmail.com');
  server.set('timeout-verify.com', 'MX', [{ exchange: 'mx.timeout-verify.com', priority: 10 }]);
});

afterAll(async () => {
  await server?.close();
});

describe('format', () => {
  test('a good address: every check passes, no reasons', async () => {
    expect(await verify('jane@acme-verify.com')).toEqual(good('jane@acme-verify.com'));
  });

  test('a non-email string is a result with valid false and a reason, and makes no DNS query', async () => {
    const before = server.queries.length;
    expect(await verify('not an email')).toEqual({
      ...good('not an email'),
      valid: false,
      domainExists: false,
      hasWebsite: false,
      hasMxRecords: false,
      reasons: ['Email address has no @'],
    });
    expect(server.queries.length).toBe(before);
  });

  test.each([
    ['', 'Email address is empty'],
    ['@acme-verify.com', 'Email address has nothing before the @'],
    ['jane@', 'Email address has no domain after the @'],
    ['jane@mail@acme-verify.com', 'Email address has more than one @'],
    ['jane@localhost', 'The domain has no dot (expected something like example.com)'],
    ['jane..doe@acme-verify.com', 'The part before the @ has characters or dots that are not allowed'],
    ['.jane@acme-verify.com', 'The part before the @ has characters or dots that are not allowed'],
    ['ja ne@acme-verify.com', 'The part before the @ has characters or dots that are not allowed'],
    ['jane@acme_verify.com', 'The domain is not a valid domain name'],
    ['jane@-acme-verify.com', 'The domain is not a valid domain name'],
    ['jane@acme-verify..com', 'The domain is not a valid domain name'],
    ['jane@192.168.0.1', 'The domain is not a valid domain name'],
    ['jane@[192.168.0.1]', 'The domain is not a valid domain name'],
    [`${'x'.repeat(65)}@acme-verify.com`, 'The part before the @ is longer than 64 characters'],
    [`${'x'.repeat(65)}@${LONG_DOMAIN}`, 'Email address is longer than 254 characters'],
  ])('%j is malformed: %s', async (email, reason) => {
    const result = await verify(email);
    expect(result).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false });
    expect(result.reasons).toEqual([reason]);
  });

  test('length limits are inclusive: a 64-character local part and a 254-character address are fine', async () => {
    expect(await verify(`${'x'.repeat(64)}@acme-verify.com`)).toMatchObject({ valid: true, reasons: [] });
    const address = `${'x'.repeat(64)}@${LONG_DOMAIN}`;
    expect(address).toHaveLength(254);
    expect(await verify(address)).toMatchObject({ valid: true, reasons: [] });
  });

  test('surrounding whitespace is dropped, the domain is case-insensitive, an IDN domain is looked up in punycode', async () => {
    expect(await verify('  Jane.Doe@ACME-Verify.com\n')).toEqual(good('Jane.Doe@ACME-Verify.com'));
    expect(await verify(`jane@${IDN_DOMAIN}`)).toEqual(good(`jane@${IDN_DOMAIN}`));
  });
});

describe('domainExists / hasMxRecords / hasWebsite', () => {
  test('NXDOMAIN: the domain does not exist (and so has no MX nor website)', async () => {
    expect(await verify('jane@no-such-domain-verify.com')).toEqual({
      ...good('jane@no-such-domain-verify.com'),
      valid: false,
      domainExists: false,
      hasMxRecords: false,
      hasWebsite: false,
      reasons: ['Domain does not exist'],
    });
  });

  test('a domain with a website but no MX records exists, is not valid', async () => {
    expect(await verify('jane@no-mx-verify.com')).toEqual({
      ...good('jane@no-mx-verify.com'),
      valid: false,
      hasMxRecords: false,
      reasons: ['Domain has no MX records'],
    });
  });

  test('a null MX (".") means the domain accepts no email', async () => {
    expect(await verify('jane@null-mx-verify.com')).toEqual({
      ...good('jane@null-mx-verify.com'),
      valid: false,
      hasMxRecords: false,
      reasons: ['Domain does not accept email (null MX record)'],
    });
  });

  test('hasWebsite: A or AAAA for the domain or for www.; without either it is false, which does not make the address invalid', async () => {
    expect(await verify('jane@mail-only-verify.com')).toEqual({
      ...good('jane@mail-only-verify.com'),
      hasWebsite: false,
      reasons: ['Domain has no website (no A or AAAA record for it or its www.)'],
    });
    expect(await verify('jane@www-only-verify.com')).toEqual(good('jane@www-only-verify.com'));
    expect(await verify('jane@no-mx-verify.com')).toMatchObject({ hasWebsite: true });
  });

  test('the lookups run concurrently: MX, NS, A, AAAA of the domain and A, AAAA of www.', async () => {
    const before = server.queries.length;
    await verify('jane@acme-verify.com');
    const asked = server.queries.slice(before).map((q) => `${q.type} ${q.name.toLowerCase()}`);
    expect(asked.sort()).toEqual(
      ['A acme-verify.com', 'A www.acme-verify.com', 'AAAA acme-verify.com', 'AAAA www.acme-verify.com', 'MX acme-verify.com', 'NS acme-verify.com'].sort(),
    );
  });
});

describe('DNS failures are reported as such, never as "does not exist"', () => {
  test('a resolver timeout: domainExists and hasMxRecords false, reason says the lookup timed out', async () => {
    const impatient = createDnsLookup({ servers: [server.address], timeoutMs: 200, tries: 1 });
    server.delayMs = 1000;
    try {
      const started = Date.now();
      const result = await verify('jane@timeout-verify.com', impatient);
      const elapsed = Date.now() - started;
      expect(result).toEqual({
        ...good('jane@timeout-verify.com'),
        valid: false,
        domainExists: false,
        hasMxRecords: false,
        hasWebsite: false,
        reasons: ['DNS lookup timed out; could not check the domain'],
      });
      // Six lookups of 200 ms each one after another would take 1.2 s.
      expect(elapsed).toBeLessThan(900);
    } finally {
      server.delayMs = 0;
    }
  });

  test('the overall deadline bounds a slow resolver: lookups still running then count as timed out', async () => {
    const patient = createDnsLookup({ servers: [server.address], timeoutMs: 5000, tries: 1 });
    // The abandoned lookups go on until the server answers; wait for them so none outlives the test.
    const pending: Promise<unknown>[] = [];
    const tracked = Object.fromEntries(
      Object.entries(patient).map(([type, lookup]) => [
        type,
        (name: string) => {
          const p = (lookup as (n: string) => Promise<unknown>)(name);
          pending.push(p.catch(() => undefined));
          return p;
        },
      ]),
    ) as unknown as DnsLookup;
    server.delayMs = 1000;
    try {
      const started = Date.now();
      const result = await verifyEmailAddress('jane@timeout-verify.com', { dns: tracked, deadlineMs: 300 });
      expect(Date.now() - started).toBeLessThan(800);
      expect(result).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false });
      expect(result.reasons).toEqual(['DNS lookup timed out; could not check the domain']);
    } finally {
      server.delayMs = 0;
      await Promise.all(pending);
    }
  });

  test('SERVFAIL: the lookup failed, the domain could not be checked', async () => {
    server.setRcode('servfail-verify.com', 'SERVFAIL');
    try {
      const result = await verify('jane@servfail-verify.com');
      expect(result).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false });
      expect(result.reasons).toEqual(['DNS lookup failed; could not check the domain']);
    } finally {
      server.setRcode('servfail-verify.com', null);
    }
  });
});

describe('isDisposable', () => {
  test('a domain of the disposable list is disposable and not valid, even though its DNS is fine', async () => {
    expect(await verify('jane@mailinator.com')).toEqual({
      ...good('jane@mailinator.com'),
      valid: false,
      isDisposable: true,
      reasons: ['Disposable email domain'],
    });
  });

  test('any subdomain of a wildcard-list domain is disposable', async () => {
    expect(await verify('jane@sub.33mail.com')).toMatchObject({ isDisposable: true, valid: false, hasMxRecords: true });
  });

  test('an ordinary domain is not', async () => {
    expect(await verify('jane@acme-verify.com')).toMatchObject({ isDisposable: false });
  });
});

describe('isPersonalEmail', () => {
  test('a free webmail provider is personal email', async () => {
    expect(await verify('jane@gmail.com')).toEqual({ ...good('jane@gmail.com'), isPersonalEmail: true });
  });

  test('a company domain is not', async () => {
    expect(await verify('jane@acme-verify.com')).toMatchObject({ isPersonalEmail: false });
  });

  test('a disposable domain that the free list also carries is disposable, not personal', async () => {
    expect(await verify('jane@0815.ru')).toMatchObject({ isDisposable: true, isPersonalEmail: false, valid: false });
  });
});

describe('isTypo and suggestion', () => {
  test('a misspelt popular provider is a typo, with the corrected address (local part kept as typed)', async () => {
    expect(await verify('Jane.Doe@gmial.com')).toEqual({
      ...good('Jane.Doe@gmial.com'),
      // The typo domain receives mail, so the address is deliverable: valid stays true.
      isTypo: true,
      // free-email-domains lists gmial.com among free providers (people do sign up with it).
      isPersonalEmail: true,
      suggestion: 'Jane.Doe@gmail.com',
      reasons: ['Did you mean Jane.Doe@gmail.com?'],
    });
  });

  test('a malformed address can still get a suggestion', async () => {
    const result = await verify('jane@gmail');
    expect(result).toMatchObject({ valid: false, isTypo: true, suggestion: 'jane@gmail.com' });
    expect(result.reasons).toEqual(['The domain has no dot (expected something like example.com)', 'Did you mean jane@gmail.com?']);
  });

  test('a TLD guess counts only when the typed domain cannot receive mail', async () => {
    // company.cpm: no such domain, and .cpm is a slip for .com.
    expect(await verify('jane@acme-verify.cpm')).toMatchObject({
      isTypo: true,
      suggestion: 'jane@acme-verify.com',
      domainExists: false,
      reasons: ['Domain does not exist', 'Did you mean jane@acme-verify.com?'],
    });
    // The checker would turn .pt into .it; a .pt domain that receives mail is no typo.
    expect(await verify('jane@acme-verify.pt')).toEqual(good('jane@acme-verify.pt'));
  });

  test('real providers the checker mistakes for misspellings are not typos', async () => {
    expect(await verify('jane@gmx.net')).toMatchObject({ isTypo: false, suggestion: null, valid: true, isPersonalEmail: true });
  });

  test('a correctly spelt address is not a typo', async () => {
    expect(await verify('jane@gmail.com')).toMatchObject({ isTypo: false, suggestion: null });
  });
});

describe('isPlusAddressed', () => {
  test('a +tag in the local part is plus-addressing, which also makes it an alias', async () => {
    expect(await verify('jane+news@acme-verify.com')).toEqual({
      ...good('jane+news@acme-verify.com'),
      isPlusAddressed: true,
      isAlias: true,
    });
  });

  test('a bare + at either end of the local part is no tag', async () => {
    expect(await verify('+news@acme-verify.com')).toMatchObject({ isPlusAddressed: false, isAlias: false, valid: true });
    expect(await verify('jane+@acme-verify.com')).toMatchObject({ isPlusAddressed: false, isAlias: false, valid: true });
  });
});

describe('isAlias', () => {
  test('an address at an alias / relay service is an alias, not plus-addressed', async () => {
    expect(await verify('x7k2p9@privaterelay.appleid.com')).toEqual({ ...good('x7k2p9@privaterelay.appleid.com'), isAlias: true });
    expect(await verify('abc.123@mozmail.com')).toMatchObject({ isAlias: true, isPlusAddressed: false, valid: true });
  });

  test('an ordinary address is not', async () => {
    expect(await verify('jane@acme-verify.com')).toMatchObject({ isAlias: false });
  });
});

/** An app with only this route, built from the same parts as api/app.ts (key check, rate limit, error envelope). */
function verifyApp(deps: TestEnv['deps']): Express {
  const registry = new RouteRegistry(express.Router(), {
    scope: requestScope(deps.orm),
    authenticate: authenticate(deps.sessionSecret, deps.keys),
    rateLimit: rateLimit(deps.rateLimiter),
  });
  registerVerifyRoutes(registry, deps);
  return express().use(requestLog(deps.logger)).use(registry.router).use(notFoundHandler).use(errorHandler);
}

/**
 * The route with the deps of the test env, whose `dns` follows DNS_SERVERS (here: the test
 * server). It runs in an app of its own so it does not depend on api/app.ts registering it.
 */
describe('POST /v1/verify', () => {
  let env: TestEnv;
  let app: Express;
  let secretKey: string;
  let publicKey: string;

  beforeAll(async () => {
    env = await startTestEnv({ DNS_SERVERS: server.address });
    app = verifyApp(env.deps);
    ({ secretKey, publicKey } = await env.project('verify'));
  });
  afterAll(() => env?.close());

  const post = (body: unknown, key = secretKey) => request(app).post('/v1/verify').set(bearer(key)).send(body as object);

  test('answers with the public envelope and exactly the result fields', async () => {
    const res = await post({ email: 'jane+news@gmial.com' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: {
        email: 'jane+news@gmial.com',
        valid: true,
        isDisposable: false,
        isAlias: true,
        isTypo: true,
        isPlusAddressed: true,
        isPersonalEmail: true,
        domainExists: true,
        hasWebsite: true,
        hasMxRecords: true,
        reasons: ['Did you mean jane+news@gmail.com?'],
        suggestion: 'jane+news@gmail.com',
      },
    });
  });

  test('a string that is no email is a 200 result with valid false, not a 422', async () => {
    const res = await post({ email: 'hello' });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ email: 'hello', valid: false, reasons: ['Email address has no @'] });
  });

  test.each([[{}], [{ email: 42 }], [{ email: null }], [{ email: ['jane@acme-verify.com'] }]])(
    'a missing or non-string email is 422 VALIDATION_ERROR: %j',
    async (body) => {
      const res = await post(body);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({
        success: false,
        error: { code: 'VALIDATION_ERROR', statusCode: 422, errors: [expect.objectContaining({ field: 'email' })] },
      });
    },
  );

  test('secret key only: no key is 401 MISSING_AUTH, a public key is 401 INVALID_API_KEY', async () => {
    const none = await request(app).post('/v1/verify').send({ email: 'jane@acme-verify.com' });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('MISSING_AUTH');
    const pub = await post({ email: 'jane@acme-verify.com' }, publicKey);
    expect(pub.status).toBe(401);
    expect(pub.body.error.code).toBe('INVALID_API_KEY');
  });

  test('a DNS timeout is a 200 result that says so', async () => {
    const impatient = createDnsLookup({ servers: [server.address], timeoutMs: 200, tries: 1 });
    const slowApp = verifyApp({ ...env.deps, dns: impatient });
    server.delayMs = 1000;
    try {
      const res = await request(slowApp).post('/v1/verify').set(bearer(secretKey)).send({ email: 'jane@timeout-verify.com' });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false });
      expect(res.body.data.reasons).toEqual(['DNS lookup timed out; could not check the domain']);
    } finally {
      server.delayMs = 0;
    }
  });

  test('is served by the real app (api/app.ts); the OpenAPI document names the secret key or a session, not the public key', async () => {
    const res = await env.http().post('/v1/verify').set(bearer(secretKey)).send({ email: 'jane@acme-verify.com' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: good('jane@acme-verify.com') });
    const doc = await env.http().get('/openapi.json');
    expect(doc.body.paths['/v1/verify'].post.security).toEqual([{ secretKey: [] }, { session: [] }]);
  });
});
