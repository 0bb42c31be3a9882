import { setMaxListeners } from 'node:events';
import { Context } from '@temporalio/activity';
import type { Config } from '../../config';
import { adoptUnassignedEmails, claimDueEmails, handOffForRetry, markEmailsSent, releaseClaims, renewLeases } from '../../db/delivery-queue';
import { type EmailForDelivery, markEmailFailed } from '../../db/emails';
import type { Orm } from '../../db/orm';
import type { OutboxListener } from '../../db/outbox-listener';
import { PROJECT_DISABLED_ERROR } from '../../db/project-security';
import { SUPPRESSED_ERROR } from '../../db/suppressions';
import { composeMessage } from '../../mail/compose';
import { dkimKeyObject } from '../../mail/dkim';
import { type Mailer, SmtpError } from '../../mail/transport';
import { SentMarks } from './sent-marks';

export interface DeliveryRoundInput {
  queue: string;
  /** The round takes no new email after this long; the workflow then starts the next round. */
  maxSeconds: number;
}

/** An email that left the fast path after a transient failure: the workflow starts its retry workflow. */
export interface RetryHandoff {
  emailId: string;
  projectId: string;
}

export interface DeliveryRoundResult {
  sent: number;
  failed: number;
  retries: RetryHandoff[];
}

/** How long an idle engine waits for a notification before it looks anyway (leases, handed-off emails). */
const IDLE_WAIT_MS = 1000;
/** A handed-off email is passed to the workflow within about this long, even while a backlog drains. */
const HANDOFF_AFTER_MS = 500;
const EXPIRED_CHECK_MS = 1000;

type Marks = { emailId: string; smtpResponse: string };

export function createDeliveryEngineActivities({ orm, mailer, config, listener }: { orm: Orm; mailer: Mailer; config: Config; listener: OutboxListener }) {
  const { concurrency, leaseSeconds } = config.delivery;
  // A retry workflow may wait the longest backoff between attempts; its lease outlasts that.
  const handoffLeaseSeconds = config.sendRetryMaxIntervalSeconds + 120;

  return {
    /**
     * One round of the delivery engine of a task queue: claims due emails in batches (the next
     * batch while the current one sends), sends them over the worker's pooled mailer with
     * `DELIVERY_CONCURRENCY` in flight, and records each result as the relay answers — SENT right
     * after its 250 (batched with whatever else was accepted meanwhile), FAILED with a 5xx reply,
     * handed to a retry workflow on a 4xx or a relay that cannot be reached. Idle, it sleeps until
     * a writer's NOTIFY. Heartbeats throughout, so a dead worker's round is retried elsewhere
     * within seconds; its claims run out after `DELIVERY_LEASE_SECONDS` and are claimed again.
     *
     * The duplicate window is SMTP's own: an email the relay accepted whose SENT was not yet
     * written when the worker died is sent again by the engine that claims it next.
     */
    async deliverQueuedEmails(input: DeliveryRoundInput): Promise<DeliveryRoundResult> {
      const ctx = Context.current();
      // Every idle lane waits on the cancellation signal with its own listener.
      setMaxListeners(concurrency + 10, ctx.cancellationSignal);
      const em = orm.em.fork();
      await adoptUnassignedEmails(em, input.queue);
      const key = `emails:${input.queue}`;
      const deadline = Date.now() + input.maxSeconds * 1000;
      const batchSize = concurrency * 4;
      const queued: EmailForDelivery[] = [];
      const inFlight = new Set<string>();
      const retries: (RetryHandoff & { at: number })[] = [];
      const marks = new SentMarks<Marks>((m) => markEmailsSent(em, m));
      let failed = 0;
      let claiming: Promise<number> | undefined;
      let expiredCheckedAt = 0;
      const claim = () =>
        (claiming ??= (async () => {
          const claimed = await claimDueEmails(em, input.queue, batchSize, leaseSeconds);
          // Expired leases (a dead worker's emails) are rare: looked for when the queue runs short, at most once a second.
          if (claimed.length < batchSize && Date.now() - expiredCheckedAt > EXPIRED_CHECK_MS) {
            expiredCheckedAt = Date.now();
            claimed.push(...(await claimDueEmails(em, input.queue, batchSize - claimed.length, leaseSeconds, 'expired')));
          }
          queued.push(...claimed);
          return claimed.length;
        })().finally(() => (claiming = undefined)));

      const sendOne = async (c: EmailForDelivery) => {
        const id = c.email.id;
        // A suppressed address (db/suppressions.ts) or a disabled project (db/project-security.ts) fails, it is not held.
        if (c.suppressed || c.projectDisabled) {
          await markEmailFailed(em, id, c.suppressed ? SUPPRESSED_ERROR : PROJECT_DISABLED_ERROR);
          failed += 1;
          return;
        }
        const dkim = c.dkim && { domainName: c.dkim.domain, keySelector: c.dkim.selector, privateKey: dkimKeyObject(c.dkim.privateKeyPem) };
        inFlight.add(id);
        try {
          const result = await mailer.send(composeMessage(c.email, dkim));
          marks.add({ emailId: id, smtpResponse: result.response });
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          if (err instanceof SmtpError && err.permanent) {
            await markEmailFailed(em, id, message, message);
            failed += 1;
          } else {
            await handOffForRetry(em, id, message, err instanceof SmtpError ? message : null, handoffLeaseSeconds);
            retries.push({ emailId: id, projectId: c.projectId, at: Date.now() });
          }
        } finally {
          inFlight.delete(id);
        }
      };

      // The first error (PostgreSQL gone, say) ends the round for every lane; the activity then fails and is retried.
      let failure: { error: unknown } | undefined;
      const roundOver = () =>
        !!failure ||
        ctx.cancellationSignal.aborted ||
        !!marks.failure ||
        Date.now() > deadline ||
        (retries.length > 0 && Date.now() - retries[0]!.at > HANDOFF_AFTER_MS);
      const lane = async () => {
        while (!roundOver()) {
          const next = queued.shift();
          if (next) {
            if (queued.length < batchSize / 2 && !claiming) void claim().catch(() => undefined);
            await sendOne(next);
            continue;
          }
          if (retries.length > 0) return;
          const seen = listener.generation(key);
          if ((await claim()) > 0 || queued.length > 0) continue;
          await listener.wait(key, seen, Math.min(IDLE_WAIT_MS, Math.max(0, deadline - Date.now())), ctx.cancellationSignal);
        }
      };

      const beat = setInterval(() => ctx.heartbeat(), 1000);
      const renew = setInterval(() => void renewLeases(em, [...inFlight], leaseSeconds).catch(() => undefined), (leaseSeconds * 1000) / 3);
      try {
        await Promise.all(Array.from({ length: concurrency }, () => lane().catch((error: unknown) => void (failure ??= { error }))));
      } finally {
        clearInterval(beat);
        clearInterval(renew);
        await claiming?.catch(() => undefined);
        // Claimed but not started (the round ended, or failed): free for the next claim at once.
        await releaseClaims(em, queued.splice(0).map((c) => c.email.id)).catch(() => undefined);
        await marks.drain();
      }
      if (failure) throw failure.error;
      return { sent: marks.written, failed, retries: retries.map(({ emailId, projectId }) => ({ emailId, projectId })) };
    },
  };
}
