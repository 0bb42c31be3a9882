import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { ProjectWithKeys } from '../../db/projects/projects';
import type { DnsServer } from '../helpers/dns';
import { bearer, type TestEnv } from '../helpers/env';
import { type Domain, type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * Domains end to end: the real API, the domain-verification workflow on a real Temporal worker,
 * a real DNS server the worker's resolver (1000 ms timeout, one try) asks, and a real SMTP sink.
 * Re-check periods are 1 second, pending and verified alike.
 */

let sending: SendingEnv;
let dns: DnsServer;
let smtp: SmtpSink;
let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;

/** Request helpers bound to one project's secret key. */
function as(p: ProjectWithKeys) {
  const auth = bearer(p.secretKey);
  return {
    add: (domain: unknown) => env.http().post('/domains').set(auth).send({ domain }),
    list: (projectId = p.id) => env.http().get(`/domains/project/${projectId}`).set(auth),
    verify: (id: string) => env.http().get(`/domains/${id}/verify`).set(auth),
    remove: (id: string) => env.http().delete(`/domains/${id}`).set(auth),
    send: (body: object) => env.http().post('/v1/send').set(auth).send(body),
  };
}

/** The domain as the list endpoint shows it: reading it runs no check. */
async function listed(p: ProjectWithKeys, id: string): Promise<Domain | undefined> {
  const res = await as(p).list();
  expect(res.status).toBe(200);
  return (res.body as Domain[]).find((d) => d.id === id);
}

/** The return path is checked but not required: its records never check out in this file (see below). */
const NO_RETURN_PATH = { ready: false, conclusive: true };
/** publish() writes every record as TXT, the return-path MX too, so only its SPF is found. */
const PUBLISHED_AS_TXT = { returnPathMx: 'missing', returnPathSpf: 'ok' };

const record = (d: Domain, purpose: string) => d.records.find((r) => r.purpose === purpose)!;
const publish = (d: Domain) => {
  for (const r of d.records) dns.set(r.name, 'TXT', [r.value]);
};

async function addDomain(p: ProjectWithKeys, name: string): Promise<Domain> {
  const res = await as(p).add(name);
  expect(res.status).toBe(201);
  return res.body as Domain;
}

const workflowOf = (domainId: string) => env.temporal.client.workflow.getHandle(`domain-verification:${domainId}`);
const workflowStatus = async (domainId: string) => (await workflowOf(domainId).describe()).status.name;

function expectError(res: { status: number; body: { error?: { code?: string } } }, status: number, code: string) {
  expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
}

beforeAll(async () => {
  sending = await startSendingEnv({ DOMAIN_RECHECK_VERIFIED_SECONDS: '1' });
  ({ env, dns, smtp } = sending);
  [project, other] = await Promise.all([env.project('domains A'), env.project('domains B')]);
});

afterAll(() => sending.close());

test('POST /domains returns the DKIM (RSA 2048), SPF and DMARC records to publish', async () => {
  const before = Date.now();
  const res = await as(project).add('  Shape.Example.TEST ');
  expect(res.status).toBe(201);
  const domain = res.body as Domain;
  expect(domain).toEqual({
    id: expect.stringMatching(/^dom_[0-9a-f]+$/),
    projectId: project.id,
    domain: 'shape.example.test',
    status: 'pending',
    records: expect.any(Array),
    lastCheck: null,
    lastCheckedAt: null,
    verifiedAt: null,
    returnPathVerifiedAt: null,
    createdAt: expect.any(String),
    // A relay is configured here: nothing can be sent from it until it is verified.
    sending: { allowed: false, reason: expect.stringMatching(/^Publish the DNS records/) },
  });
  expect(new Date(domain.createdAt).getTime()).toBeGreaterThanOrEqual(before - 1000);

  expect(domain.records.map((r) => r.purpose)).toEqual(['dkim', 'spf', 'dmarc', 'return-path', 'return-path']);
  // The return path: an MX naming the receiver and SPF at bounces.<domain> (docs/configuration.md).
  expect(domain.records.filter((r) => r.purpose === 'return-path')).toEqual([
    { type: 'MX', name: 'bounces.shape.example.test', value: '10 localhost', purpose: 'return-path' },
    { type: 'TXT', name: 'bounces.shape.example.test', value: 'v=spf1 include:shape.example.test ~all', purpose: 'return-path' },
  ]);
  const dkim = record(domain, 'dkim');
  expect(dkim).toEqual({ type: 'TXT', name: expect.any(String), value: expect.any(String), purpose: 'dkim' });
  expect(dkim.name).toMatch(/^[a-z0-9-]+\._domainkey\.shape\.example\.test$/);
  const p = /^v=DKIM1; k=rsa; p=([A-Za-z0-9+/]+={0,2})$/.exec(dkim.value)?.[1];
  expect(p).toBeDefined();
  const key = createPublicKey({ key: Buffer.from(p!, 'base64'), format: 'der', type: 'spki' });
  expect(key.asymmetricKeyType).toBe('rsa');
  expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048);
  // The value is exactly the DER SPKI, not something the parser merely tolerates.
  expect(key.export({ format: 'der', type: 'spki' }).toString('base64')).toBe(p);

  expect(record(domain, 'spf')).toEqual({ type: 'TXT', name: 'shape.example.test', value: 'v=spf1 a mx ~all', purpose: 'spf' });
  expect(record(domain, 'dmarc')).toEqual({
    type: 'TXT',
    name: '_dmarc.shape.example.test',
    value: 'v=DMARC1; p=none',
    purpose: 'dmarc',
  });
  // The private half never leaves the server.
  expect(JSON.stringify(res.body)).not.toMatch(/PRIVATE|privateKey/i);

  // Each domain gets its own key pair.
  const second = await addDomain(project, 'shape2.example.test');
  expect(record(second, 'dkim').value).not.toBe(dkim.value);

  // Every pending domain has its verification workflow.
  expect(await workflowStatus(domain.id)).toBe('RUNNING');
  expect(await workflowStatus(second.id)).toBe('RUNNING');
});

test('names that are not domain names are refused with 422 on `domain`, and nothing is stored', async () => {
  const p = await env.project('validation');
  for (const bad of ['not a domain', '192.168.0.1', '10.0.0.256', '::1', '2001:db8::1', '[2001:db8::1]', '', 'example..com', '-bad.example.com', 'http://example.com', 'localhost', 42]) {
    const res = await as(p).add(bad);
    expect({ bad, status: res.status, code: res.body.error?.code }).toEqual({ bad, status: 422, code: 'VALIDATION_ERROR' });
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain('domain');
  }
  const list = await as(p).list();
  expect(list.body).toEqual([]);
});

test('a domain belongs to one project in the instance: 409 in another project, whatever its case', async () => {
  const domain = await addDomain(project, 'owned.example.test');
  for (const name of ['owned.example.test', 'OWNED.Example.Test', ' owned.example.test ']) {
    const res = await as(other).add(name);
    expectError(res, 409, 'CONFLICT');
  }
  const otherList = await as(other).list();
  expect((otherList.body as Domain[]).map((d) => d.domain)).not.toContain('owned.example.test');
  expect((await listed(project, domain.id))?.domain).toBe('owned.example.test');
});

test('the workflow verifies a domain once its records are published, with no API call', async () => {
  const domain = await addDomain(project, 'auto.example.test');
  // The first background check finds nothing.
  const pending = await waitUntil(async () => {
    const d = await listed(project, domain.id);
    return d?.lastCheck ? d : undefined;
  }, 10_000);
  expect(pending.status).toBe('pending');
  expect(pending.lastCheck).toEqual({ verified: false, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'missing', spf: 'missing', dmarc: 'missing', returnPathMx: 'missing', returnPathSpf: 'missing' } });
  expect(pending.verifiedAt).toBeNull();

  const published = Date.now();
  publish(domain);
  // Only the list endpoint from here on: it reads, it does not check.
  const verified = await waitUntil(async () => {
    const d = await listed(project, domain.id);
    return d?.status === 'verified' && d;
  }, 5_000);
  expect(verified.lastCheck).toEqual({ verified: true, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'ok', spf: 'ok', dmarc: 'ok', ...PUBLISHED_AS_TXT } });
  expect(new Date(verified.verifiedAt!).getTime()).toBeGreaterThanOrEqual(published - 1000);
  expect(new Date(verified.lastCheckedAt!).getTime()).toBeGreaterThanOrEqual(new Date(verified.verifiedAt!).getTime());
  // It keeps watching a verified domain, to notice records that disappear.
  expect(await workflowStatus(domain.id)).toBe('RUNNING');
});

test('GET /domains/:id/verify checks at once, through the workflow: missing before publishing, ok after', async () => {
  const domain = await addDomain(project, 'forced.example.test');
  const { runId } = await workflowOf(domain.id).describe();

  const start1 = Date.now();
  const before = await as(project).verify(domain.id);
  expect(before.status).toBe(200);
  expect(before.body).toMatchObject({ id: domain.id, domain: 'forced.example.test', status: 'pending', verifiedAt: null });
  expect(before.body.lastCheck).toEqual({ verified: false, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'missing', spf: 'missing', dmarc: 'missing', returnPathMx: 'missing', returnPathSpf: 'missing' } });
  expect(new Date(before.body.lastCheckedAt).getTime()).toBeGreaterThanOrEqual(start1 - 50);

  publish(domain);
  const start2 = Date.now();
  const after = await as(project).verify(domain.id);
  expect(after.status).toBe(200);
  expect(after.body.status).toBe('verified');
  expect(after.body.lastCheck).toEqual({ verified: true, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'ok', spf: 'ok', dmarc: 'ok', ...PUBLISHED_AS_TXT } });
  expect(new Date(after.body.verifiedAt).getTime()).toBeGreaterThanOrEqual(start2 - 50);
  expect(after.body.records).toEqual(domain.records);

  // The same workflow run answered both checks, as Updates.
  const handle = workflowOf(domain.id);
  expect((await handle.describe()).runId).toBe(runId);
  const history = await handle.fetchHistory();
  const updates = (history.events ?? [])
    .map((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name)
    .filter(Boolean);
  expect(updates).toEqual(['checkDomainNow', 'checkDomainNow']);
});

test('a forced check revives a verification workflow that is no longer running', async () => {
  const domain = await addDomain(project, 'revive.example.test');
  const { runId } = await workflowOf(domain.id).describe();
  await workflowOf(domain.id).terminate('test: simulate a lost workflow');
  expect(await workflowStatus(domain.id)).toBe('TERMINATED');

  publish(domain);
  const res = await as(project).verify(domain.id);
  expect(res.status).toBe(200);
  expect(res.body.status).toBe('verified');
  expect(res.body.sending).toEqual({ allowed: true, reason: 'The domain is verified.' });
  const now = await workflowOf(domain.id).describe();
  expect(now.status.name).toBe('RUNNING');
  expect(now.runId).not.toBe(runId);
});

test('a wrong DKIM key is a mismatch and leaves the domain pending', async () => {
  const domain = await addDomain(project, 'mismatch.example.test');
  const foreign = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
  dns.set(record(domain, 'dkim').name, 'TXT', [`v=DKIM1; k=rsa; p=${foreign}`]);
  dns.set(record(domain, 'spf').name, 'TXT', ['some-site-verification=abc']);
  dns.set(record(domain, 'dmarc').name, 'TXT', [record(domain, 'dmarc').value]);

  const res = await as(project).verify(domain.id);
  expect(res.status).toBe(200);
  expect(res.body.status).toBe('pending');
  expect(res.body.lastCheck).toEqual({ verified: false, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'mismatch', spf: 'mismatch', dmarc: 'ok', returnPathMx: 'missing', returnPathSpf: 'missing' } });
  // A key that merely starts with ours is not ours either.
  const ours = /p=(.*)$/.exec(record(domain, 'dkim').value)![1]!;
  dns.set(record(domain, 'dkim').name, 'TXT', [`v=DKIM1; k=rsa; p=${ours}AAAA`]);
  const extended = await as(project).verify(domain.id);
  expect(extended.body.lastCheck.records.dkim).toBe('mismatch');
  expect(extended.body.status).toBe('pending');

  // Several TXT records at the name: ours among them is enough, whitespace in the key allowed (RFC 6376 FWS).
  const spaced = `v=DKIM1;k=rsa;  p= ${ours.slice(0, 100)} ${ours.slice(100)}`;
  dns.set(record(domain, 'dkim').name, 'TXT', [`v=DKIM1; k=rsa; p=${foreign}`, spaced]);
  const fixed = await as(project).verify(domain.id);
  expect(fixed.body.lastCheck.records.dkim).toBe('ok');
  expect(fixed.body.status).toBe('verified');
});

test('a verified domain whose DKIM record disappears goes back to pending, and sends from it are refused', async () => {
  const domain = await sending.verifiedDomain(project, 'lost.example.test');
  const ok = await as(project).send({ to: 'someone@example.org', from: 'hi@lost.example.test', subject: 'S', body: 'B' });
  expect(ok.status).toBe(200);

  dns.remove(record(domain, 'dkim').name);
  // The workflow's own re-check (verified period: 1 s) notices; no API call.
  const demoted = await waitUntil(async () => {
    const d = await listed(project, domain.id);
    return d?.status === 'pending' && d;
  }, 5_000);
  expect(demoted.lastCheck).toEqual({ verified: false, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'missing', spf: 'ok', dmarc: 'ok', ...PUBLISHED_AS_TXT } });
  expect(demoted.verifiedAt).toBeNull();

  const refused = await as(project).send({ to: 'someone@example.org', from: 'hi@lost.example.test', subject: 'S', body: 'B' });
  expectError(refused, 403, 'DOMAIN_NOT_VERIFIED');

  // The workflow is still there, and republishing verifies the domain again.
  expect(await workflowStatus(domain.id)).toBe('RUNNING');
  publish(domain);
  await waitUntil(async () => (await listed(project, domain.id))?.status === 'verified', 5_000);
});

test('a DNS timeout or SERVFAIL says nothing about the records: a verified domain stays verified', async () => {
  const domain = await sending.verifiedDomain(project, 'slow.example.test');
  const verifiedAt = domain.verifiedAt;
  expect(verifiedAt).not.toBeNull();

  dns.delayMs = 1500; // above the worker's 1000 ms resolver timeout
  try {
    const started = Date.now();
    const forced = await as(project).verify(domain.id);
    // It answers once the lookups time out; a timeout is a result, not a reason to retry.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(forced.status).toBe(200);
    expect(forced.body.status).toBe('verified');
    expect(forced.body.verifiedAt).toBe(verifiedAt);
    expect(forced.body.lastCheck).toEqual({
      verified: false,
      conclusive: false,
      returnPath: { ready: false, conclusive: false },
      records: { dkim: 'unreachable', spf: 'unreachable', dmarc: 'unreachable', returnPathMx: 'unreachable', returnPathSpf: 'unreachable' },
    });
    // Background re-checks in the same conditions change nothing either.
    const later = await waitUntil(async () => {
      const d = await listed(project, domain.id);
      return d && new Date(d.lastCheckedAt!) > new Date(forced.body.lastCheckedAt) && d.lastCheck?.conclusive === false && d;
    }, 8_000);
    expect(later.status).toBe('verified');
    expect(later.verifiedAt).toBe(verifiedAt);
    const send = await as(project).send({ to: 'slow@example.org', from: 'hi@slow.example.test', subject: 'S', body: 'B' });
    expect(send.status).toBe(200);
  } finally {
    dns.delayMs = 0;
  }

  dns.setRcode(record(domain, 'dkim').name, 'SERVFAIL');
  try {
    const servfail = await as(project).verify(domain.id);
    expect(servfail.body.status).toBe('verified');
    expect(servfail.body.lastCheck).toEqual({ verified: false, conclusive: false, returnPath: NO_RETURN_PATH, records: { dkim: 'unreachable', spf: 'ok', dmarc: 'ok', ...PUBLISHED_AS_TXT } });
  } finally {
    dns.setRcode(record(domain, 'dkim').name, null);
  }

  // DNS answers again: checks are conclusive again.
  const recovered = await as(project).verify(domain.id);
  expect(recovered.body.lastCheck).toEqual({ verified: true, conclusive: true, returnPath: NO_RETURN_PATH, records: { dkim: 'ok', spf: 'ok', dmarc: 'ok', ...PUBLISHED_AS_TXT } });
  expect(recovered.body.verifiedAt).toBe(verifiedAt);
  await smtp.waitFor(1);
  expect(smtp.messages.some((m) => m.envelope.to.includes('slow@example.org'))).toBe(true);
});

test('DELETE ends the verification workflow; the domain is gone and its name free again', async () => {
  const domain = await addDomain(project, 'gone.example.test');
  expect(await workflowStatus(domain.id)).toBe('RUNNING');

  const res = await as(project).remove(domain.id);
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ id: domain.id, deleted: true });

  await waitUntil(async () => (await workflowStatus(domain.id)) !== 'RUNNING', 5_000);
  // Ended by the DELETE itself (a cancellation), not merely by a later check finding the row gone.
  const history = await workflowOf(domain.id).fetchHistory();
  expect((history.events ?? []).some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(true);
  // It stays ended: the run returned (no continue-as-new hands over to another), so only a new start could revive it.
  expect(await workflowStatus(domain.id)).toBe('COMPLETED');

  expectError(await as(project).verify(domain.id), 404, 'DOMAIN_NOT_FOUND');
  expectError(await as(project).remove(domain.id), 404, 'DOMAIN_NOT_FOUND');
  expect(await listed(project, domain.id)).toBeUndefined();
  // A 404 from verify does not revive the workflow.
  expect(await workflowStatus(domain.id)).not.toBe('RUNNING');

  const again = await addDomain(other, 'gone.example.test');
  expect(again.id).not.toBe(domain.id);
  expect(again.projectId).toBe(other.id);
});

test("another project's key gets 404 on verify, delete and the project's list; the domain is untouched", async () => {
  const domain = await addDomain(project, 'private.example.test');

  expectError(await as(other).verify(domain.id), 404, 'DOMAIN_NOT_FOUND');
  expectError(await as(other).remove(domain.id), 404, 'DOMAIN_NOT_FOUND');
  const foreignList = await as(other).list(project.id);
  expect(foreignList.status).toBe(404);
  expect(foreignList.body.error.code).toBe('PROJECT_NOT_FOUND');
  const foreignList2 = await as(project).list(other.id);
  expect(foreignList2.status).toBe(404);

  // Unknown ids are 404 too, and start no workflow.
  expectError(await as(project).verify('dom_doesnotexist'), 404, 'DOMAIN_NOT_FOUND');
  await expect(workflowOf('dom_doesnotexist').describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);

  expect((await listed(project, domain.id))?.domain).toBe('private.example.test');
  expect(await workflowStatus(domain.id)).toBe('RUNNING');
  const otherDomains = (await as(other).list()).body as Domain[];
  expect(otherDomains.every((d) => d.projectId === other.id)).toBe(true);
  expect(otherDomains.map((d) => d.id)).not.toContain(domain.id);
});

test('the project list shows pending and verified domains of the project only', async () => {
  const p = await env.project('list');
  const pending = await addDomain(p, 'list-pending.example.test');
  const verified = await sending.verifiedDomain(p, 'list-verified.example.test');
  const res = await as(p).list();
  expect(res.status).toBe(200);
  const byName = Object.fromEntries((res.body as Domain[]).map((d) => [d.domain, d.status]));
  expect(byName).toEqual({ 'list-pending.example.test': 'pending', 'list-verified.example.test': 'verified' });
  expect((res.body as Domain[]).map((d) => d.id).sort()).toEqual([pending.id, verified.id].sort());
});
