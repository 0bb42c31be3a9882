import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query, queryOne } from '../../db/sql';
import { ContactIdKey, CurrentStepKey, ProjectIdKey, TidingsWorkflowIdKey, WaitingForEventKey } from '../../temporal/search-attributes';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney, type ExecutionView, track, waitForExecution } from '../helpers/journeys';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

/**
 * One end-to-end test per step type and branch, on the real Temporal dev server. One journey
 * minute lasts 60 ms here (JOURNEY_TIME_SCALE 0.001); a WAIT_FOR_EVENT timeout of 1000 s lasts 1 s.
 */
const DOMAIN = 'steps.test';

interface Hit {
  path: string;
  method: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let project: ProjectWithKeys;
let webhookSecret: string;
let server: http.Server;
let base: string;
const hits: Hit[] = [];
const served = new Map<string, number>();

const auth = () => bearer(project.secretKey);
const messagesTo = (address: string) => smtp.messages.filter((m) => m.envelope.to.includes(address));
const hitsOn = (path: string) => hits.filter((h) => h.path === path);
const sign = (body: Buffer) => `sha256=${createHmac('sha256', webhookSecret).update(body).digest('hex')}`;

async function template(name: string, subject: string, body: string, type: 'TRANSACTIONAL' | 'MARKETING' = 'TRANSACTIONAL') {
  const res = await env.http().post('/templates').set(auth()).send({ name, subject, body, from: `hello@${DOMAIN}`, type });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** A step as GET /workflows/:id/executions/:executionId returns it (the helper's type leaves some fields out). */
type StepView = NonNullable<ExecutionView['steps']>[number] & { error: string | null; startedAt: string; finishedAt: string | null };
const stepAt = (run: ExecutionView, i: number) => run.steps!.at(i) as StepView;
const stepsOf = (run: ExecutionView) => run.steps!.map((s) => [s.stepType, s.status, s.branch]);

beforeAll(async () => {
  sending = await startSendingEnv({ JOURNEY_TIME_SCALE: '0.001', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
  ({ env, smtp } = sending);
  project = await env.project('journey steps');
  webhookSecret = (await queryOne<{ webhook_secret: string }>(env.orm.em.fork(), 'select webhook_secret from projects where id = ?', [
    project.id,
  ]))!.webhook_secret;

  // /ok → 200; /flaky → 500 on its first request, 200 after; /bad → 400.
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url!, 'http://x').pathname;
      hits.push({ path, method: req.method!, headers: req.headers, body: Buffer.concat(chunks) });
      const n = (served.get(path) ?? 0) + 1;
      served.set(path, n);
      if (path === '/bad') return void res.writeHead(400, { 'Content-Type': 'text/plain' }).end('bad request (test)');
      if (path === '/flaky' && n === 1) return void res.writeHead(500, { 'Content-Type': 'text/plain' }).end('try later (test)');
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  await sending.verifiedDomain(project, DOMAIN);
});

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await sending?.close();
});

describe('WEBHOOK', () => {
  test('signed request with the default JSON body; the execution completes with the status as output', async () => {
    const wf = await buildJourney(env, project, {
      eventName: 'hook-ok',
      steps: [{ key: 'hook', type: 'WEBHOOK', config: { url: `${base}/ok` } }],
      transitions: [['trigger', 'hook']],
    });
    const t = await track(env, project, 'hook-ok@example.org', 'hook-ok', { company: 'Acme', plan: { value: 'pro', persistent: false } });
    const run = await waitForExecution(env, project, wf.id, t.contact, ['COMPLETED']);
    expect(stepsOf(run)).toEqual([['WEBHOOK', 'COMPLETED', null]]);
    expect(run.steps![0]!.output).toEqual({ status: 200 });

    const [hit] = hitsOn('/ok');
    expect(hitsOn('/ok')).toHaveLength(1);
    expect(hit!.method).toBe('POST');
    expect(hit!.headers['content-type']).toBe('application/json');
    expect(hit!.headers['x-signature']).toBe(sign(hit!.body));
    expect(hit!.headers['x-tidings-execution']).toBe(run.id);
    expect(hit!.headers['x-tidings-step']).toBe(wf.stepIds.hook);
    expect(JSON.parse(hit!.body.toString('utf8'))).toEqual({
      contact: { id: t.contact, email: 'hook-ok@example.org', subscribed: true, data: { company: 'Acme' } },
      workflow: { id: wf.id },
      execution: { id: run.id, stepId: wf.stepIds.hook },
      context: { company: 'Acme', plan: 'pro' },
    });
  });

  test('a 500 is retried, and the execution completes once the endpoint answers 200', async () => {
    const wf = await buildJourney(env, project, {
      eventName: 'hook-flaky',
      steps: [
        { key: 'hook', type: 'WEBHOOK', config: { url: `${base}/flaky` } },
        { key: 'exit', type: 'EXIT', config: { reason: 'after hook' } },
      ],
      transitions: [
        ['trigger', 'hook'],
        ['hook', 'exit'],
      ],
    });
    const t = await track(env, project, 'hook-flaky@example.org', 'hook-flaky');
    const run = await waitForExecution(env, project, wf.id, t.contact, ['EXITED'], 30_000);
    expect(stepsOf(run)).toEqual([
      ['WEBHOOK', 'COMPLETED', null],
      ['EXIT', 'COMPLETED', null],
    ]);
    expect(run.steps![0]!.output).toEqual({ status: 200 });
    const flaky = hitsOn('/flaky');
    expect(flaky).toHaveLength(2);
    // The retry is the same delivery: same execution and step ids, same body, valid signature.
    expect(flaky.map((h) => h.headers['x-tidings-execution'])).toEqual([run.id, run.id]);
    expect(flaky[1]!.body.equals(flaky[0]!.body)).toBe(true);
    for (const h of flaky) expect(h.headers['x-signature']).toBe(sign(h.body));
  });

  const badHook = async (eventName: string, email: string) => {
    const wf = await buildJourney(env, project, {
      eventName,
      steps: [
        { key: 'hook', type: 'WEBHOOK', config: { url: `${base}/bad` } },
        { key: 'exit', type: 'EXIT', config: {} },
      ],
      transitions: [
        ['trigger', 'hook'],
        ['hook', 'exit'],
      ],
    });
    const t = await track(env, project, email, eventName);
    return { wf, run: await waitForExecution(env, project, wf.id, t.contact, ['FAILED']) };
  };

  test('a 400 is not retried: the execution is FAILED with an error, its last step FAILED', async () => {
    const before = hitsOn('/bad').length;
    const { run } = await badHook('hook-bad', 'hook-bad@example.org');
    expect(run.error).toEqual(expect.any(String));
    expect(run.error).not.toBe('');
    expect(stepsOf(run)).toEqual([['WEBHOOK', 'FAILED', null]]);
    expect(run.steps!.at(-1)!.status).toBe('FAILED');
    expect(stepAt(run, -1).error).toEqual(expect.any(String));
    // Once the workflow has closed no attempt of the step can come any more.
    const handle = env.temporal.client.workflow.getHandle(`journey:${run.id}`);
    await expect(handle.result()).rejects.toThrow();
    expect(hitsOn('/bad').length - before).toBe(1);
    expect((await handle.describe()).status.name).toBe('FAILED');
  });

  // BUG (reported): journey.ts records `err.message` of the ActivityFailure, which is always
  // "Activity task failed"; the webhook's answer is in its `cause`. Remove `.failing` once fixed.
  test('the FAILED execution and step say what went wrong (the 400 and its body)', async () => {
    const { run } = await badHook('hook-bad-why', 'hook-bad-why@example.org');
    expect(run.error).toMatch(/answered 400: bad request \(test\)/);
    expect(stepAt(run, -1).error).toMatch(/answered 400/);
  });
});

describe('SEND_EMAIL', () => {
  test('a CUSTOM recipient gets the mail, rendered with the contact data and the execution context', async () => {
    const tpl = await template('custom', 'New {{plan}} signup: {{email}}', '<p>{{email}} from {{company}} chose {{plan}}</p>');
    const wf = await buildJourney(env, project, {
      eventName: 'custom-mail',
      steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl, recipient: { type: 'CUSTOM', customEmail: 'sales@example.net' } } }],
      transitions: [['trigger', 'mail']],
    });
    // company is stored on the contact; plan is one-shot, so it exists only in the execution context.
    const t = await track(env, project, 'buyer@example.org', 'custom-mail', { company: 'Acme', plan: { value: 'pro', persistent: false } });
    const run = await waitForExecution(env, project, wf.id, t.contact, ['COMPLETED']);
    expect(stepsOf(run)).toEqual([['SEND_EMAIL', 'COMPLETED', null]]);
    const emailId = (run.steps![0]!.output as { emailId: string }).emailId;
    expect(emailId).toEqual(expect.any(String));

    const [raw] = await waitUntil(async () => (messagesTo('sales@example.net').length ? messagesTo('sales@example.net') : undefined));
    const mail = await simpleParser(raw!.raw);
    expect(mail.subject).toBe('New pro signup: buyer@example.org');
    expect(mail.html).toContain('buyer@example.org from Acme chose pro');
    expect(messagesTo('buyer@example.org')).toHaveLength(0);
    // SENT is written right after the relay's 250, a moment after the sink has the message.
    const row = await waitUntil(async () => {
      const found = await queryOne<{ to_email: string; status: string; source: string; contact_id: string }>(
        env.orm.em.fork(),
        'select to_email, status, source, contact_id from emails where id = ?',
        [emailId],
      );
      return found?.status === 'SENT' ? found : undefined;
    });
    expect(row).toEqual({ to_email: 'sales@example.net', status: 'SENT', source: 'workflow', contact_id: t.contact });
  });

  test('a MARKETING template to an unsubscribed contact is skipped (no mail); a subscribed one gets it', async () => {
    const tpl = await template('promo', 'Our news', '<p>News for {{email}}</p>', 'MARKETING');
    const wf = await buildJourney(env, project, {
      eventName: 'promo',
      steps: [{ key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl } }],
      transitions: [['trigger', 'mail']],
    });
    const unsub = (
      await env.http().post('/v1/track').set(auth()).send({ email: 'promo-unsub@example.org', event: 'promo', subscribed: false })
    ).body.data.contact as string;
    const sub = await track(env, project, 'promo-sub@example.org', 'promo');

    const skipped = await waitForExecution(env, project, wf.id, unsub, ['COMPLETED']);
    expect(stepsOf(skipped)).toEqual([['SEND_EMAIL', 'COMPLETED', null]]);
    expect(skipped.steps![0]!.output).toEqual({ skipped: 'unsubscribed' });
    const sent = await waitForExecution(env, project, wf.id, sub.contact, ['COMPLETED']);
    expect(sent.steps![0]!.output).toEqual({ emailId: expect.any(String) });

    await waitUntil(async () => messagesTo('promo-sub@example.org').length === 1);
    const mail = await simpleParser(messagesTo('promo-sub@example.org')[0]!.raw);
    expect(messagesTo('promo-sub@example.org')[0]!.raw.toString('utf8')).toMatch(/^List-Unsubscribe:\s+<http/im);
    expect(mail.subject).toBe('Our news');
    // The skipped execution has COMPLETED without writing an email: there is nothing to deliver later.
    const rows = await query(env.orm.em.fork(), 'select id from emails where project_id = ? and contact_id = ?', [project.id, unsub]);
    expect(rows).toHaveLength(0);
    expect(messagesTo('promo-unsub@example.org')).toHaveLength(0);
  });
});

test('DELAY: WAITING while delayed, then COMPLETED with the DELAY step COMPLETED', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'delay-only',
    steps: [{ key: 'delay', type: 'DELAY', config: { amount: 30, unit: 'minutes' } }], // 1.8 s here
    transitions: [['trigger', 'delay']],
  });
  const t = await track(env, project, 'delay@example.org', 'delay-only');
  const waiting = await waitForExecution(env, project, wf.id, t.contact, ['WAITING']);
  expect(waiting.currentStepId).toBe(wf.stepIds.delay);
  expect(waiting.waitingForEvent).toBeNull();
  expect(stepsOf(waiting)).toEqual([['DELAY', 'RUNNING', null]]);

  const done = await waitForExecution(env, project, wf.id, t.contact, ['COMPLETED']);
  expect(stepsOf(done)).toEqual([['DELAY', 'COMPLETED', null]]);
  const step = stepAt(done, 0);
  expect(Date.parse(step.finishedAt!) - Date.parse(step.startedAt)).toBeGreaterThanOrEqual(1500);
  expect((done as unknown as { finishedAt: string | null }).finishedAt).not.toBeNull();
});

test('CONDITION on event.<key> reads the execution context: yes and no branches', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'scored',
    steps: [
      { key: 'check', type: 'CONDITION', config: { field: 'event.score', operator: 'greaterThan', value: 10 } },
      { key: 'high', type: 'EXIT', config: { reason: 'high' } },
      { key: 'low', type: 'EXIT', config: { reason: 'low' } },
    ],
    transitions: [
      ['trigger', 'check'],
      ['check', 'high', 'yes'],
      ['check', 'low', 'no'],
    ],
  });
  // One-shot values: the score is in the context only, never in the contact's data.
  const high = await track(env, project, 'score-high@example.org', 'scored', { score: { value: 42, persistent: false } });
  const low = await track(env, project, 'score-low@example.org', 'scored', { score: { value: 3, persistent: false } });
  const highRun = await waitForExecution(env, project, wf.id, high.contact, ['EXITED']);
  const lowRun = await waitForExecution(env, project, wf.id, low.contact, ['EXITED']);
  expect(highRun.exitReason).toBe('high');
  expect(stepsOf(highRun)).toEqual([
    ['CONDITION', 'COMPLETED', 'yes'],
    ['EXIT', 'COMPLETED', null],
  ]);
  expect(highRun.steps![0]!.output).toEqual({ result: true });
  expect(lowRun.exitReason).toBe('low');
  expect(stepsOf(lowRun)).toEqual([
    ['CONDITION', 'COMPLETED', 'no'],
    ['EXIT', 'COMPLETED', null],
  ]);
  expect(lowRun.context).toEqual({ score: 3 });
  const contact = await env.http().get(`/contacts/${high.contact}`).set(auth());
  expect(contact.body.data).toEqual({});
});

test('execution list: ?status= filter and cursor paging over 25 executions', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'bulk',
    steps: [
      { key: 'check', type: 'CONDITION', config: { field: 'event.park', operator: 'equals', value: true } },
      { key: 'park', type: 'WAIT_FOR_EVENT', config: { eventName: 'bulk-never' } },
      { key: 'exit', type: 'EXIT', config: {} },
    ],
    transitions: [
      ['trigger', 'check'],
      ['check', 'park', 'yes'],
      ['check', 'exit', 'no'],
    ],
  });
  const N = 25;
  const park = (i: number) => i % 3 === 0; // 9 parked (WAITING), 16 EXITED
  for (let i = 0; i < N; i += 5) {
    await Promise.all(
      Array.from({ length: 5 }, (_, k) => i + k).map((j) =>
        track(env, project, `bulk-${j}@example.org`, 'bulk', { park: { value: park(j), persistent: false } }),
      ),
    );
  }
  const page = async (qs: string) => {
    const res = await env.http().get(`/workflows/${wf.id}/executions?${qs}`).set(auth());
    expect(res.status).toBe(200);
    return res.body as { data: ExecutionView[]; cursor: string | null; hasMore: boolean; total: number };
  };
  const parked = Array.from({ length: N }, (_, i) => i).filter(park).length;
  await waitUntil(async () => {
    const [w, e] = await Promise.all([page('status=WAITING&limit=100'), page('status=EXITED&limit=100')]);
    return w.total === parked && e.total === N - parked;
  }, 30_000);

  // Every status filter returns only its status.
  const waiting = await page('status=WAITING&limit=100');
  expect(waiting.data).toHaveLength(parked);
  expect(waiting.data.every((e) => e.status === 'WAITING' && e.waitingForEvent === 'bulk-never')).toBe(true);
  expect((await page('status=RUNNING')).total).toBe(0);

  // Cursor paging, newest first: 10 + 10 + 5, total on the first page only, no repeats.
  const p1 = await page('limit=10');
  expect([p1.data.length, p1.hasMore, p1.total]).toEqual([10, true, N]);
  const p2 = await page(`limit=10&cursor=${p1.cursor}`);
  expect([p2.data.length, p2.hasMore, p2.total]).toEqual([10, true, 0]);
  const p3 = await page(`limit=10&cursor=${p2.cursor}`);
  expect([p3.data.length, p3.hasMore, p3.cursor]).toEqual([5, false, null]);
  const ids = [...p1.data, ...p2.data, ...p3.data].map((e) => e.id);
  expect(new Set(ids).size).toBe(N);
  expect(ids).toEqual([...ids].sort().reverse());

  // Paging inside a filter.
  const e1 = await page('status=EXITED&limit=10');
  const e2 = await page(`status=EXITED&limit=10&cursor=${e1.cursor}`);
  expect([e1.data.length, e1.hasMore, e1.total, e2.data.length, e2.hasMore]).toEqual([10, true, N - parked, N - parked - 10, false]);
  expect(new Set([...e1.data, ...e2.data].map((e) => e.id)).size).toBe(N - parked);
  expect([...e1.data, ...e2.data].every((e) => e.status === 'EXITED')).toBe(true);

  expect((await env.http().get(`/workflows/${wf.id}/executions?status=SLEEPING`).set(auth())).status).toBe(422);
  expect((await env.http().get(`/workflows/${wf.id}/executions?cursor=nope`).set(auth())).status).toBe(400);

  const cancelled = await env.http().post(`/workflows/${wf.id}/executions/cancel-all`).set(auth());
  expect(cancelled.body).toEqual({ cancelled: parked });
});

test('search attributes find the execution: ids always, CurrentStep / WaitingForEvent while waiting', async () => {
  const eventName = `sa-finish-${Date.now()}`;
  const wf = await buildJourney(env, project, {
    eventName: 'sa-start',
    steps: [
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName } },
      { key: 'exit', type: 'EXIT', config: { reason: 'done' } },
    ],
    transitions: [
      ['trigger', 'wait'],
      ['wait', 'exit'],
    ],
  });
  const t = await track(env, project, 'search@example.org', 'sa-start');
  const waiting = await waitForExecution(env, project, wf.id, t.contact, ['WAITING']);
  expect(waiting.waitingForEvent).toBe(eventName);
  const workflowId = `journey:${waiting.id}`;
  const handle = env.temporal.client.workflow.getHandle(workflowId);

  const described = await handle.describe();
  const typed = described.typedSearchAttributes;
  expect(typed.get(ProjectIdKey)).toBe(project.id);
  expect(typed.get(TidingsWorkflowIdKey)).toBe(wf.id);
  expect(typed.get(ContactIdKey)).toBe(t.contact);
  expect(typed.get(CurrentStepKey)).toBe('WAIT_FOR_EVENT');
  expect(typed.get(WaitingForEventKey)).toBe(eventName);
  // The untyped (deprecated) view says the same.
  expect(described.searchAttributes).toMatchObject({
    ProjectId: [project.id],
    TidingsWorkflowId: [wf.id],
    ContactId: [t.contact],
    CurrentStep: ['WAIT_FOR_EVENT'],
    WaitingForEvent: [eventName],
  });

  // What an operator types into the Web UI; visibility lags a little behind.
  const found = async (q: string) => {
    const ids: string[] = [];
    for await (const w of env.temporal.client.workflow.list({ query: q })) ids.push(w.workflowId);
    return ids;
  };
  await waitUntil(async () => {
    const ids = await found(`ProjectId="${project.id}" AND WaitingForEvent="${eventName}"`);
    return ids.length === 1 && ids[0] === workflowId;
  }, 10_000);
  expect(await found(`TidingsWorkflowId="${wf.id}" AND ContactId="${t.contact}" AND CurrentStep="WAIT_FOR_EVENT"`)).toEqual([workflowId]);

  // Once it has moved on and ended, it no longer shows as waiting.
  await track(env, project, 'search@example.org', eventName);
  const done = await waitForExecution(env, project, wf.id, t.contact, ['EXITED']);
  expect(stepsOf(done)).toEqual([
    ['WAIT_FOR_EVENT', 'COMPLETED', 'event'],
    ['EXIT', 'COMPLETED', null],
  ]);
  await waitUntil(async () => (await handle.describe()).status.name === 'COMPLETED', 10_000);
  const after = (await handle.describe()).typedSearchAttributes;
  expect(after.get(ProjectIdKey)).toBe(project.id);
  expect(after.get(CurrentStepKey)).toBeUndefined();
  expect(after.get(WaitingForEventKey)).toBeUndefined();
  await waitUntil(async () => (await found(`ProjectId="${project.id}" AND WaitingForEvent="${eventName}"`)).length === 0, 10_000);
});
