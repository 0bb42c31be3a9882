import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import { upsertContact } from '../../db/contacts/contacts';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { type StepConfigs, stepConfigSchemas } from '../../db/journeys/steps';
import { createDnsLookup, type DnsLookup } from '../../mail/dns';
import { checkWebhookTarget, isBlockedAddress, WebhookTargetRefused } from '../../temporal/journeys/webhook-guard';
import { type CallWebhookInput, createWebhookActivities, WebhookError } from '../../temporal/journeys/webhooks';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { startTestEnv, type TestEnv } from '../helpers/env';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

let env: TestEnv;
let dnsServer: DnsServer;
let dns: DnsLookup;
let server: http.Server;
let port: number;
let base: string;
let received: Received[] = [];
let project: ProjectWithKeys;
let secret: string;
let contactId: string;

const BIG = 'é'.repeat(3000); // 6000 bytes; the 2 KB cut falls between the two bytes of an é

beforeAll(async () => {
  env = await startTestEnv({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
  dnsServer = await startDnsServer();
  dns = createDnsLookup({ servers: [dnsServer.address], timeoutMs: 1000, tries: 1 });
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
      const path = new URL(req.url!, 'http://x').pathname;
      const status = /^\/status\/(\d{3})$/.exec(path)?.[1];
      if (path === '/slow') {
        // Never answers: only the caller's own timeout ends the call (afterAll closes the connection).
      } else if (status) {
        res.writeHead(Number(status), { 'Content-Type': 'text/plain' }).end(`status ${status} body`);
      } else if (path === '/big') {
        res.writeHead(200).end(BIG);
      } else if (path === '/redirect') {
        res.writeHead(302, { Location: `${base}/elsewhere` }).end();
      } else {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ok":true}');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;

  project = await env.project('webhooks');
  secret = (await queryOne<{ webhook_secret: string }>(env.orm.em.fork(), 'select webhook_secret from projects where id = ?', [project.id]))!
    .webhook_secret;
  contactId = (
    await upsertContact(
      env.orm.em.fork(),
      project.id,
      { email: 'ann@example.org', data: { plan: 'pro', firstName: 'Ann', nested: { tier: 'gold' } } },
      { subscribedWhenNew: true },
    )
  ).contact.id;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dnsServer.close();
  await env.close();
});

beforeEach(() => {
  received = [];
});

const activities = (opts: { allowPrivate?: boolean; timeoutMs?: number } = {}) =>
  createWebhookActivities({
    orm: env.orm,
    config: { ...env.deps.config, webhookAllowPrivateTargets: opts.allowPrivate ?? env.deps.config.webhookAllowPrivateTargets },
    dns,
    timeoutMs: opts.timeoutMs,
  });

const input = (config: Partial<StepConfigs['WEBHOOK']> & { url: string }, context: Record<string, unknown> = { orderId: 'ord_9', total: 12.5 }): CallWebhookInput => ({
  projectId: project.id,
  contactId,
  workflowId: 'wf_1',
  executionId: 'exe_1',
  stepId: 'stp_1',
  config: stepConfigSchemas.WEBHOOK.parse(config),
  context,
});

const sign = (body: Buffer | string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the call to fail');
}

test('the allow flag comes from WEBHOOK_ALLOW_PRIVATE_TARGETS', () => {
  expect(env.deps.config.webhookAllowPrivateTargets).toBe(true);
});

test('default request: POST, JSON body of contact/workflow/execution/context, signed with the project secret', async () => {
  const result = await activities().callWebhook(input({ url: `${base}/hook` }));
  expect(result).toEqual({ status: 200, body: '{"ok":true}' });
  expect(received).toHaveLength(1);
  const [req] = received as [Received];
  expect(req.method).toBe('POST');
  expect(req.url).toBe('/hook');
  expect(req.headers['content-type']).toBe('application/json');
  expect(req.headers['user-agent']).toBe('Tidings-Webhook/1');
  expect(req.headers['x-tidings-execution']).toBe('exe_1');
  expect(req.headers['x-tidings-step']).toBe('stp_1');
  expect(req.headers['x-signature']).toBe(sign(req.body));
  expect(req.headers['x-signature']).not.toBe(`sha256=${createHmac('sha256', 'other').update(req.body).digest('hex')}`);
  expect(JSON.parse(req.body.toString('utf8'))).toEqual({
    contact: { id: contactId, email: 'ann@example.org', subscribed: true, data: { plan: 'pro', firstName: 'Ann', nested: { tier: 'gold' } } },
    workflow: { id: 'wf_1' },
    execution: { id: 'exe_1', stepId: 'stp_1' },
    context: { orderId: 'ord_9', total: 12.5 },
  });
});

test('templated url, headers and body; the signature covers the exact body bytes', async () => {
  const body =
    '{"email":"{{email}}","name":"{{firstName}} & co","tier":"{{data.nested.tier}}","order":"{{context.orderId}}",' +
    '"wf":"{{workflow.id}}","exec":"{{execution.id}}","step":"{{execution.stepId}}","id":"{{contact.id}}","x":"{{nope ?? "none"}}"}';
  const result = await activities().callWebhook(
    input({
      url: `${base}/contacts/{{id}}?plan={{data.plan}}&order={{context.orderId}}`,
      method: 'PUT',
      headers: { Authorization: 'Bearer {{context.token}}', 'X-Plan': '{{plan}}', 'X-Signature': 'forged', 'User-Agent': 'spoof' },
      body,
    }, { orderId: 'ord_9', token: 't0k<en>' }),
  );
  expect(result.status).toBe(200);
  const [req] = received as [Received];
  expect(req.method).toBe('PUT');
  expect(req.url).toBe(`/contacts/${contactId}?plan=pro&order=ord_9`);
  expect(req.headers.authorization).toBe('Bearer t0k<en>'); // no HTML escaping
  expect(req.headers['x-plan']).toBe('pro');
  expect(req.headers['user-agent']).toBe('Tidings-Webhook/1');
  expect(req.headers['content-type']).toBe('application/json');
  expect(req.headers['x-signature']).toBe(sign(req.body));
  expect(JSON.parse(req.body.toString('utf8'))).toEqual({
    email: 'ann@example.org',
    name: 'Ann & co',
    tier: 'gold',
    order: 'ord_9',
    wf: 'wf_1',
    exec: 'exe_1',
    step: 'stp_1',
    id: contactId,
    x: 'none',
  });
});

test('a non-JSON custom body is text/plain unless a Content-Type is configured; GET sends no body', async () => {
  await activities().callWebhook(input({ url: `${base}/a`, body: 'plan={{plan}}' }));
  await activities().callWebhook(input({ url: `${base}/b`, body: 'plan={{plan}}', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }));
  await activities().callWebhook(input({ url: `${base}/c?e={{email}}`, method: 'GET' }));
  const [a, b, c] = received as [Received, Received, Received];
  expect([a.headers['content-type'], a.body.toString()]).toEqual(['text/plain; charset=utf-8', 'plan=pro']);
  expect([b.headers['content-type'], b.body.toString()]).toEqual(['application/x-www-form-urlencoded', 'plan=pro']);
  expect(c.method).toBe('GET');
  expect(c.url).toBe('/c?e=ann@example.org');
  expect(c.body.length).toBe(0);
  expect(c.headers['x-signature']).toBe(sign(''));
  expect(c.headers['content-type']).toBeUndefined();
});

test('2xx / 3xx are results; the body is cut to 2 KB; redirects are not followed', async () => {
  const big = await activities().callWebhook(input({ url: `${base}/big` }));
  expect(big.status).toBe(200);
  expect(Buffer.byteLength(big.body)).toBeLessThanOrEqual(2048);
  expect(big.body).toBe('é'.repeat(1024));
  expect(await activities().callWebhook(input({ url: `${base}/status/204` }))).toEqual({ status: 204, body: '' });
  const redirect = await activities().callWebhook(input({ url: `${base}/redirect` }));
  expect(redirect.status).toBe(302);
  expect(received.map((r) => r.url)).toEqual(['/big', '/status/204', '/redirect']);
});

test('5xx, 408 and 429 throw plain (retryable) errors', async () => {
  for (const status of [500, 503, 408, 429]) {
    const err = await failure(activities().callWebhook(input({ url: `${base}/status/${status}` })));
    expect(err).toBeInstanceOf(WebhookError);
    expect(err).not.toBeInstanceOf(ApplicationFailure);
    expect(err.name).toBe('WebhookServerError');
    expect(err.message).toContain(`answered ${status}: status ${status} body`);
  }
});

test('other 4xx are non-retryable WebhookClientError failures', async () => {
  for (const status of [400, 401, 404, 410, 422]) {
    const err = await failure(activities().callWebhook(input({ url: `${base}/status/${status}` })));
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'WebhookClientError', nonRetryable: true });
    expect((err as ApplicationFailure).details).toEqual([{ status, body: `status ${status} body` }]);
  }
});

test('a server slower than the timeout gives a retryable timeout error', async () => {
  const started = Date.now();
  const err = await failure(activities({ timeoutMs: 300 }).callWebhook(input({ url: `${base}/slow` })));
  expect(Date.now() - started).toBeLessThan(1_500);
  expect(err).toBeInstanceOf(WebhookError);
  expect(err).not.toBeInstanceOf(ApplicationFailure);
  expect(err.name).toBe('WebhookTimeout');
  expect(err.message).toMatch(/timed out after 300 ms/);
});

test('connection refused is a retryable network error', async () => {
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const deadPort = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const err = await failure(activities().callWebhook(input({ url: `http://127.0.0.1:${deadPort}/x` })));
  expect(err).toBeInstanceOf(WebhookError);
  expect(err.name).toBe('WebhookNetworkError');
});

test('a host name is resolved through the service resolver and the request goes to the checked address', async () => {
  dnsServer.set('hooks.example.test', 'A', ['127.0.0.1']);
  const result = await activities().callWebhook(input({ url: `http://hooks.example.test:${port}/named` }));
  expect(result.status).toBe(200);
  const [req] = received as [Received];
  expect(req.url).toBe('/named');
  expect(req.headers.host).toBe(`hooks.example.test:${port}`);
  // Resolved once, for the check (A and AAAA); the connection asked no resolver again.
  expect(dnsServer.queries.filter((q) => q.name === 'hooks.example.test').map((q) => q.type).sort()).toEqual(['A', 'AAAA']);
  // An unknown name is a (retryable) resolution failure, not a refusal.
  const err = await failure(activities().callWebhook(input({ url: `http://nowhere.example.test:${port}/x` })));
  expect(err).toBeInstanceOf(WebhookError);
  expect(err.name).toBe('WebhookNetworkError');
});

describe('SSRF guard with WEBHOOK_ALLOW_PRIVATE_TARGETS off', () => {
  const refusedUrls = () => [
    `http://127.0.0.1:${port}/x`,
    'http://10.0.0.1/x',
    'http://169.254.169.254/latest/meta-data/',
    `http://[::1]:${port}/x`,
    `http://[::ffff:127.0.0.1]:${port}/x`,
    `http://2130706433:${port}/x`, // 127.0.0.1 spelled as a number
    `http://localhost:${port}/x`,
    `http://private.example.test:${port}/x`, // resolves to 192.168.1.1
    `http://mixed.example.test:${port}/x`, // a public A and a private AAAA
    'ftp://example.org/file',
    'file:///etc/passwd',
    'not a url',
    '{{context.missing}}', // renders empty
  ];

  beforeAll(() => {
    dnsServer.set('private.example.test', 'A', ['192.168.1.1']);
    dnsServer.set('mixed.example.test', 'A', ['93.184.216.34']);
    dnsServer.set('mixed.example.test', 'AAAA', ['fd00::1']);
  });

  test('refused targets are non-retryable WebhookRefused failures and nothing is sent', async () => {
    const acts = activities({ allowPrivate: false });
    for (const url of refusedUrls()) {
      const err = await failure(acts.callWebhook(input({ url })));
      expect([url, err instanceof ApplicationFailure, (err as ApplicationFailure).type, (err as ApplicationFailure).nonRetryable]).toEqual([
        url,
        true,
        'WebhookRefused',
        true,
      ]);
    }
    expect(received).toHaveLength(0);
  });

  test('checkWebhookTarget names the reason', async () => {
    const opts = { dns, allowPrivate: false };
    await expect(checkWebhookTarget('http://private.example.test/', opts)).rejects.toThrow(/private\.example\.test \(192\.168\.1\.1\)/);
    await expect(checkWebhookTarget('ftp://example.org/', opts)).rejects.toThrow(/http or https, not ftp/);
    await expect(checkWebhookTarget('http://[::1]/', opts)).rejects.toBeInstanceOf(WebhookTargetRefused);
    // Allowed: the same names pass with the flag on, and a public address passes with it off.
    await expect(checkWebhookTarget('http://private.example.test/', { dns, allowPrivate: true })).resolves.toMatchObject({ address: '192.168.1.1', family: 4 });
    dnsServer.set('public.example.test', 'A', ['93.184.216.34']);
    await expect(checkWebhookTarget('https://public.example.test/x', opts)).resolves.toMatchObject({
      hostname: 'public.example.test',
      address: '93.184.216.34',
      family: 4,
    });
    dnsServer.set('v6only.example.test', 'AAAA', ['2606:4700::1111']);
    await expect(checkWebhookTarget('https://v6only.example.test/x', opts)).resolves.toMatchObject({ address: '2606:4700::1111', family: 6 });
  });
});

test('isBlockedAddress: private, loopback, link-local, unspecified, CGNAT and IPv4-mapped forms', () => {
  const blocked = [
    '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.1.1', '127.0.0.1', '127.8.9.10',
    '169.254.169.254', '0.0.0.0', '100.64.0.1', '100.127.255.254', '224.0.0.1', '255.255.255.255',
    '::', '::1', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'febf::1', 'fe80::1%eth0', 'ff02::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::ffff:0:0', '::127.0.0.1',
    '64:ff9b::a9fe:a9fe', '2002:c0a8:0101::1', '[::1]', 'not-an-ip',
  ];
  const allowed = ['8.8.8.8', '93.184.216.34', '172.32.0.1', '100.128.0.1', '11.0.0.1', '169.255.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '2001:4860:4860::8888'];
  expect(blocked.filter((a) => !isBlockedAddress(a))).toEqual([]);
  expect(allowed.filter((a) => isBlockedAddress(a))).toEqual([]);
});

test('bad templates, bad rendered headers and a missing contact fail without retries', async () => {
  const acts = activities();
  await expect(acts.callWebhook(input({ url: `${base}/{{#if}}` }))).rejects.toMatchObject({ type: 'WebhookTemplateError', nonRetryable: true });
  await expect(acts.callWebhook(input({ url: `${base}/x`, headers: { 'X-Inject': '{{context.evil}}' } }, { evil: 'a\r\nX-Other: 1' }))).rejects.toMatchObject({
    type: 'WebhookRefused',
    nonRetryable: true,
  });
  await expect(acts.callWebhook({ ...input({ url: `${base}/x` }), contactId: 'cnt_missing' })).rejects.toMatchObject({
    type: 'ContactNotFound',
    nonRetryable: true,
  });
  expect(received).toHaveLength(0);
});
