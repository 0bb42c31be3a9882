/**
 * The references a bench measures in the same run as the service, on the same stack, so a figure
 * comes with what this machine does without the platform at that moment:
 *
 *  - rawPoolRate: messages composed and DKIM-signed like the service's (mail/compose.ts), through a
 *    fresh pooled nodemailer transport (5 connections, as the worker's own pool) straight to the
 *    stack's SMTP sink (bench/send.ts, bench/campaign.ts): a widely used client as the reference,
 *    although the service sends through mail/smtp-pool.ts;
 *  - bareWorkflowRate: executions of bench/baseline-workflow.ts (one no-op activity) on their own
 *    worker and task queue, against the stack's Temporal dev server (bench/workflows.ts).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { loadDomainKeys } from '../db/domains/domains';
import { compileContent, renderForContact } from '../db/messages/content';
import type { JsonValue } from '../db/entities/contact';
import { linkSigningSecret } from '../db/projects/secrets';
import nodemailer from 'nodemailer';
import { composeMessage, renderMessage } from '../mail/compose';
import { dkimKeyObject } from '../mail/dkim';
import { smtpOptionsFromUrl } from '../mail/smtp-pool';
import { WORKER_TUNING } from '../temporal/worker';
import type { BareActivities } from './baseline-workflow';
import type { Stack } from './harness';
import { closedLoop, log } from './support';

/** What one raw message is made of: the template, the sender, and recipient i's data. */
export interface RawMessageSpec {
  subject: string;
  body: string;
  fromEmail: string;
  fromName: string;
  /** MARKETING mail: the unsubscribe footer and List-Unsubscribe headers, as a campaign email has. */
  marketing: boolean;
  /** Click tracking and the open pixel. */
  tracking: boolean;
  /** Recipient i: its display name, its stored data and the one-shot variables of its render. */
  recipient(i: number): { name: string | null; data: Record<string, JsonValue>; extra: Record<string, unknown> };
}

export interface RawFigures {
  count: number;
  inFlight: number;
  seconds: number;
  rate: number;
  /** This process's CPU per message: composing, signing, SMTP client and the sink. */
  cpuMs: number;
}

/**
 * `count` messages through a fresh pooled transport, `inFlight` at a time. Messages are rendered
 * ahead; the clock covers composing (nodemailer builds the MIME and signs it on send) and SMTP.
 * Empties the sink afterwards, so run it while no other mail is on its way.
 */
export async function rawPoolRate(
  stack: Pick<Stack, 'orm' | 'config' | 'sink'>,
  domainId: string,
  spec: RawMessageSpec,
  count: number,
  inFlight: number,
): Promise<RawFigures> {
  const em = stack.orm.em.fork();
  const keys = await loadDomainKeys(em, domainId);
  if (!keys) throw new Error(`raw: no DKIM keys for domain ${domainId}`);
  const dkim = { domainName: keys.domain, keySelector: keys.selector, privateKey: dkimKeyObject(keys.privateKeyPem) };
  const linkSecret = await linkSigningSecret(em, stack.config.jwtSecret);
  const content = compileContent(spec.subject, spec.body);
  const now = new Date().toISOString();
  const emails = Array.from({ length: count }, (_, i) => {
    const id = randomUUID();
    const r = spec.recipient(i);
    const contact = { id: `cnt_raw${i}`, email: `raw${i}@bench.example.org`, subscribed: true, data: r.data, createdAt: now, updatedAt: now };
    const rendered = renderForContact(content, contact, {
      extra: r.extra,
      publicUrl: stack.config.publicUrl,
      linkSecret,
      marketing: spec.marketing ? { projectName: 'Bench' } : false,
      tracking: spec.tracking ? { emailId: id } : undefined,
    });
    return { id, toEmail: contact.email, toName: r.name, fromEmail: spec.fromEmail, fromName: spec.fromName, replyTo: null, ...rendered, attachments: [] };
  });
  if (!stack.config.smtpUrl) throw new Error('raw: the stack has no SMTP_URL');
  const url = new URL(stack.config.smtpUrl);
  url.searchParams.set('pool', 'true');
  // As many connections as the service's own pool keeps to this relay.
  url.searchParams.set('maxConnections', String(smtpOptionsFromUrl(stack.config.smtpUrl).maxConnections));
  const pool = nodemailer.createTransport(url.toString());
  const before = stack.sink.messages.length;
  try {
    const start = performance.now();
    const cpu = process.cpuUsage();
    await closedLoop(count, inFlight, async (i) => {
      const { envelope, raw } = await renderMessage(composeMessage(emails[i]!, dkim));
      await pool.sendMail({ envelope, raw });
    });
    const seconds = (performance.now() - start) / 1000;
    const used = process.cpuUsage(cpu);
    if (stack.sink.messages.length - before !== count) throw new Error('raw: the sink did not get every message');
    return { count, inFlight, seconds, rate: count / seconds, cpuMs: (used.user + used.system) / 1000 / count };
  } finally {
    pool.close();
    stack.sink.clear();
  }
}

/**
 * rawPoolRate once, unmeasured, before the reference is taken: in a process that had not sent
 * through it yet the first run measured 12–15 % fewer messages a second with a fifth more CPU per
 * message than the next (V8 still compiling nodemailer, the composer and the sink's path), which
 * flattered every ratio over it.
 */
export async function warmRawPool(stack: Pick<Stack, 'orm' | 'config' | 'sink'>, domainId: string, spec: RawMessageSpec, count: number, inFlight: number): Promise<void> {
  const figures = await rawPoolRate(stack, domainId, spec, count, inFlight);
  log(`raw pool warm-up (not measured): ${figures.rate.toFixed(0)} msg/s`);
}

export interface BareWorkflowFigures {
  n: number;
  concurrency: number;
  /** Client-side latency of each start call (ms). */
  startLatencies: Float64Array;
  startsFailed: number;
  /** First start call → last start answered. */
  startedSeconds: number;
  completed: number;
  /** First start call → the last execution's close time (the server's). */
  completedSeconds: number;
}

/**
 * Starts `n` executions of the bare workflow, `concurrency` start calls in flight (as the bench's
 * clients have requests in flight), on a task queue of their own served by a worker of their own
 * (the service's WORKER_TUNING, then `workerOptions` on top, as the bench gives the service's worker), then waits for
 * them to close and reads their close times from the server's visibility store. One execution
 * runs first, unmeasured, so the worker is polling and its workflow code loaded.
 */
export async function bareWorkflowRate(
  stack: Pick<Stack, 'settings' | 'gateway'>,
  opts: { n: number; concurrency: number; workerOptions?: Partial<WorkerOptions>; interrupted: () => boolean },
): Promise<BareWorkflowFigures> {
  const taskQueue = `bench-bare-${process.pid}-${randomUUID().slice(0, 8)}`;
  const activities: BareActivities = { noop: async () => undefined };
  const connection = await NativeConnection.connect({ address: stack.settings.address });
  const worker = await Worker.create({
    connection,
    namespace: stack.settings.namespace,
    taskQueue,
    activities,
    workflowsPath: require.resolve('./baseline-workflow'),
    ...WORKER_TUNING,
    ...opts.workerOptions,
  });
  const running = worker.run();
  const client = stack.gateway.client.workflow;
  const stopped = running.then(() => {
    throw new Error('the bare workflow worker stopped');
  });
  stopped.catch(() => undefined); // fails the race below only
  try {
    await Promise.race([client.execute('bareOneActivity', { taskQueue, workflowId: `${taskQueue}:warm-up` }), stopped]);
    const startLatencies = new Float64Array(opts.n);
    let startsFailed = 0;
    const wallStart = Date.now();
    const t0 = performance.now();
    await closedLoop(opts.n, opts.concurrency, async (i) => {
      if (opts.interrupted()) return;
      const s = performance.now();
      try {
        await client.start('bareOneActivity', { taskQueue, workflowId: `${taskQueue}:${i}` });
      } catch (err) {
        if (startsFailed++ === 0) log(`bare workflow start: ${(err as Error).message}`);
      }
      startLatencies[i] = performance.now() - s;
    });
    const startedSeconds = (performance.now() - t0) / 1000;

    // Closed ones, warm-up included, until all are or none closes for a minute.
    const query = `TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Completed'`;
    const expected = opts.n - startsFailed + 1;
    let closed = 0;
    for (let lastProgress = Date.now(); !opts.interrupted() && closed < expected && Date.now() - lastProgress < 60_000; ) {
      await new Promise((r) => setTimeout(r, 200));
      const now = (await client.count(query)).count;
      if (now !== closed) [closed, lastProgress] = [now, Date.now()];
    }
    let completed = 0;
    let lastClose = NaN;
    for await (const w of client.list({ query })) {
      if (w.workflowId.endsWith(':warm-up') || !w.closeTime) continue;
      completed++;
      lastClose = Number.isNaN(lastClose) ? w.closeTime.getTime() : Math.max(lastClose, w.closeTime.getTime());
    }
    return { n: opts.n, concurrency: opts.concurrency, startLatencies, startsFailed, startedSeconds, completed, completedSeconds: (lastClose - wallStart) / 1000 };
  } finally {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running.catch(() => undefined).finally(() => connection.close());
  }
}
