import type { ProjectWithKeys } from '../../db/projects/projects';
import { workflowIds } from '../../temporal/ids';
import { deliveryEngineStateQuery } from '../../temporal/delivery/workflow';
import { bearer, type TestEnv } from '../helpers/env';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpMessage, SmtpSink } from '../helpers/smtp';

/**
 * The delivery engine when the relay itself cannot be reached (its port closed): instead of
 * handing every email to a retry workflow of its own, each engine of the queue opens its breaker,
 * gives the emails back as QUEUED and probes the relay with a few of them, backing off up to
 * SEND_RETRY_MAX_INTERVAL_SECONDS; once the relay is back on the same port, every email goes once.
 */

const DOMAIN = 'breaker.test';
const N = 40;
/** The breaker's ceiling here: probes at most this far apart. */
const CEILING_SECONDS = 2;
const ENGINES = 2;

let sending: SendingEnv;
let env: TestEnv;
let smtp: SmtpSink;
let project: ProjectWithKeys;

interface EmailSummary {
  id: string;
  status: string;
  attempts: number;
  error: string | null;
}

const emailIdOf = (m: SmtpMessage) => /^Message-ID:\s*<([^@>]+)@/im.exec(m.raw.toString('utf8'))?.[1];
const log = (msg: string) => process.env.TEST_VERBOSE && process.stderr.write(`[breaker] ${msg}\n`);

beforeAll(async () => {
  sending = await startSendingEnv({ SEND_RETRY_MAX_INTERVAL_SECONDS: String(CEILING_SECONDS), DELIVERY_ENGINES: String(ENGINES) });
  ({ env, smtp } = sending);
  project = await env.project('breaker');
  await sending.verifiedDomain(project, DOMAIN);
});

afterAll(() => sending.close());

const engines = () => Array.from({ length: ENGINES }, (_, i) => env.temporal.client.workflow.getHandle(workflowIds.deliveryEngine(env.taskQueue, i)));
const engineStates = () => Promise.all(engines().map((h) => h.query(deliveryEngineStateQuery)));

/** One page holds them all, so the statuses are one snapshot. */
async function listed(ids: string[]): Promise<EmailSummary[]> {
  const res = await env.http().get('/emails?limit=100').set(bearer(project.secretKey));
  expect(res.status).toBe(200);
  return (res.body.data as EmailSummary[]).filter((e) => ids.includes(e.id));
}

/** Every sendEmails execution on this file's task queue: the engine's per-email retry workflows. */
async function retryWorkflows(): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of env.temporal.client.workflow.list({ query: `WorkflowType = 'sendEmails' AND TaskQueue = '${env.taskQueue}'` })) {
    ids.push(wf.workflowId);
  }
  return ids;
}

test('relay unreachable: the engines open their breaker, keep the mail QUEUED without retry workflows, and deliver each email once when it is back', async () => {
  await smtp.stop();
  let ids: string[] = [];
  try {
    const to = Array.from({ length: N }, (_, i) => `outage-${i}@example.org`);
    const res = await env.http().post('/v1/send').set(bearer(project.secretKey)).send({ to, from: `hello@${DOMAIN}`, subject: 'S', body: 'B' });
    expect(res.status).toBe(200);
    ids = (res.body.data.emails as { email: string }[]).map((e) => e.email);

    // Every engine found the relay down, and has probed it again since, in vain.
    const states = await waitUntil(async () => {
      const s = await engineStates();
      return s.every((e) => e.relay === 'unreachable' && e.failedProbes >= 2) && s;
    }, 30_000);
    for (const state of states) {
      expect(state).toEqual({
        relay: 'unreachable',
        since: expect.any(String),
        error: expect.stringMatching(/ECONNREFUSED/),
        failedProbes: expect.any(Number),
        nextProbeAt: expect.any(String),
      });
    }
    // What the Web UI shows as the execution's current details.
    const metadata = await engines()[0]!.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toMatch(/Relay unreachable\*\* since .*ECONNREFUSED.*next probe at /);

    // The emails wait as QUEUED: no attempt counted against them, the reason given.
    const waiting = await waitUntil(async () => {
      const list = await listed(ids);
      return list.length === N && list.every((e) => e.status === 'QUEUED') && list;
    });
    expect(waiting.filter((e) => e.attempts !== 0 || !/^Relay unreachable: .*ECONNREFUSED/.test(e.error ?? ''))).toEqual([]);
    // No email of theirs left the fast path for a retry workflow.
    expect(await retryWorkflows()).toEqual([]);
    for (const id of ids) {
      await expect(env.temporal.client.workflow.getHandle(workflowIds.sendEmails(id)).describe()).rejects.toThrow(/not found/i);
    }
  } finally {
    await smtp.restart();
  }

  // SENT is final, and each mark follows the relay's 250: every copy of these emails is at the sink.
  await waitUntil(async () => (await listed(ids)).filter((e) => e.status === 'SENT').length === N, 30_000);
  await waitUntil(async () => (await engineStates()).every((s) => s.relay === 'reachable'), 30_000);
  const arrivals = new Map<string, number>();
  for (const m of smtp.messages) arrivals.set(emailIdOf(m)!, (arrivals.get(emailIdOf(m)!) ?? 0) + 1);
  expect(ids.filter((id) => arrivals.get(id) !== 1)).toEqual([]);
  expect(await retryWorkflows()).toEqual([]);

  // The waits between probes: timers in each engine's history, none beyond the ceiling.
  for (const handle of engines()) {
    const timers = (await handle.fetchHistory()).events!.flatMap((e) => e.timerStartedEventAttributes ?? []);
    const seconds = timers.map((t) => Number(t.startToFireTimeout!.seconds ?? 0) + (t.startToFireTimeout!.nanos ?? 0) / 1e9);
    log(`${handle.workflowId}: waits ${seconds.join(', ')} s`);
    expect(seconds.length).toBeGreaterThanOrEqual(2);
    expect(seconds.filter((s) => s > CEILING_SECONDS)).toEqual([]);
  }
}, 90_000);
