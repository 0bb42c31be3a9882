import { Resolver } from 'node:dns/promises';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { ConfigError, loadConfig } from '../../config';
import { dkimRecordName, dkimRecordValue, generateDkimKeyPair } from '../../mail/dkim';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/** Account mail (verification, password reset) signed with the system sender's DKIM key when one is configured. */

const FROM_DOMAIN = 'sys-mail.test';
const SELECTOR = 'accounts';
let dir: string;
let keyFile: string;
let publicKeyBase64: string;
let dns: DnsServer;
let smtp: SmtpSink;
let env: TestEnv;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'tidings-dkim-'));
  const keys = await generateDkimKeyPair();
  keyFile = path.join(dir, 'system-dkim.pem');
  writeFileSync(keyFile, keys.privateKeyPem);
  publicKeyBase64 = keys.publicKeyBase64;
  dns = await startDnsServer();
  dns.set(dkimRecordName(FROM_DOMAIN, SELECTOR), 'TXT', [dkimRecordValue(publicKeyBase64)]);
  smtp = await startSmtpSink();
  env = await startTestEnv({
    SMTP_URL: smtp.url,
    SYSTEM_EMAIL_FROM: `Tidings <accounts@${FROM_DOMAIN}>`,
    SYSTEM_DKIM_SELECTOR: SELECTOR,
    SYSTEM_DKIM_KEY_FILE: keyFile,
    SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
  });
  await env.startWorker();
}, 60_000);

afterAll(async () => {
  await env?.close();
  await smtp?.close();
  await dns?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the verification email is DKIM-signed for the system sender’s domain and verifies against its DNS record', async () => {
  const email = 'signed-up@example.org';
  // Its own client IP: sign-ups are limited per IP, and other test files sign up from 127.0.0.1.
  const signup = await env.http().post('/auth/signup').set('X-Forwarded-For', '10.78.0.1').send({ email, password: 'a long enough password' });
  expect(signup.status).toBe(201);
  const [message] = await smtp.waitFor(1);
  expect(message!.envelope.to).toEqual([email]);
  const resolver = new Resolver();
  resolver.setServers([dns.address]);
  const dkim = await dkimVerify(message!.raw, { resolver: (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') });
  expect(dkim.results[0]?.status.result).toBe('pass');
  expect(dkim.results[0]?.signingDomain).toBe(FROM_DOMAIN);
  expect(dkim.results[0]?.selector).toBe(SELECTOR);
});

describe('configuration', () => {
  const base = { SYSTEM_EMAIL_FROM: `Tidings <accounts@${FROM_DOMAIN}>` };

  test('both set: the key is read once, for the domain of SYSTEM_EMAIL_FROM; neither set: unsigned', () => {
    const config = loadConfig({ ...base, SYSTEM_DKIM_SELECTOR: SELECTOR, SYSTEM_DKIM_KEY_FILE: keyFile });
    expect(config.auth.systemDkim).toEqual({ domain: FROM_DOMAIN, selector: SELECTOR, privateKeyPem: expect.stringContaining('PRIVATE KEY') });
    expect(loadConfig(base).auth.systemDkim).toBeUndefined();
  });

  test('one without the other, a missing file, or a file that is not an RSA key: a clear ConfigError', () => {
    const notAKey = path.join(dir, 'not-a-key.pem');
    writeFileSync(notAKey, 'hello');
    const cases: [Record<string, string>, RegExp][] = [
      [{ SYSTEM_DKIM_SELECTOR: SELECTOR }, /set together or not at all/],
      [{ SYSTEM_DKIM_KEY_FILE: keyFile }, /set together or not at all/],
      [{ SYSTEM_DKIM_SELECTOR: SELECTOR, SYSTEM_DKIM_KEY_FILE: path.join(dir, 'missing.pem') }, /SYSTEM_DKIM_KEY_FILE .*missing\.pem: not a readable RSA private key/],
      [{ SYSTEM_DKIM_SELECTOR: SELECTOR, SYSTEM_DKIM_KEY_FILE: notAKey }, /not a readable RSA private key/],
      [{ SYSTEM_DKIM_SELECTOR: 'not a label', SYSTEM_DKIM_KEY_FILE: keyFile }, /SYSTEM_DKIM_SELECTOR: Must be a DNS label/],
    ];
    for (const [env, message] of cases) {
      expect(() => loadConfig({ ...base, ...env })).toThrow(ConfigError);
      expect(() => loadConfig({ ...base, ...env })).toThrow(message);
    }
  });
});
