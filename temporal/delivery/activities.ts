import { setMaxListeners } from 'node:events';
import { Context } from '@temporalio/activity';
import type { Config } from '../../config';
import { BurstYield, type Foreground } from '../../foreground';
import { handoffKey, type DeliveryHandoff } from '../../db/messages/delivery-handoff';
import { adoptUnassignedEmails, handOffForRetry, releaseClaims, renewLeases, type SentMark } from '../../db/messages/delivery-queue';
import { EngineStatements } from '../../db/messages/engine-statements';
import { type EmailForDelivery, markEmailFailed } from '../../db/messages/emails';
import type { Orm } from '../../db/orm';
import type { OutboxListener } from '../../db/messages/outbox-listener';
import { PROJECT_DISABLED_ERROR } from '../../db/projects/security';
import { SUPPRESSED_ERROR } from '../../db/contacts/suppressions';
import { composeMessage } from '../../mail/compose';
import { dkimKeyObject } from '../../mail/dkim';
import { relayUnreachable, SmtpError } from '../../mail/smtp-errors';
import type { Mailer } from '../../mail/transport';
import { SentMarks } from './sent-marks';

export interface DeliveryRoundInput {
  queue: string;
  /** The round takes no new email after this long; the workflow then starts the next round. */
  maxSeconds: number;
  /**
   * The engine's breaker is open (the relay was unreachable): claim at most this many emails,
   * once, send them and report, instead of draining the queue (half-open).
   */
  probe?: number;
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
  /**
   * The relay itself could not be reached, and it answered nothing meanwhile: the round stopped
   * and gave every email it held back as QUEUED, none handed to a retry workflow. The engine
   * opens its breaker (temporal/delivery/workflow.ts).
   */
  relayUnreachable?: { since: string; error: string };
}

/** How long an idle engine waits for a notification before it looks anyway (leases, handed-off emails). */
const IDLE_WAIT_MS = 1000;
/** A handed-off email is passed to the workflow within about this long, even while a backlog drains. */
const HANDOFF_AFTER_MS = 500;
const EXPIRED_CHECK_MS = 1000;
/**
 * What a round that may let a burst go first takes handed off (within HANDOFF_MAX_CHARS): while
 * it yields, the burst's emails wait in memory rather than in the table, where each would cost a claim.
 */
const HANDOFF_WHILE_YIELDING = 10_000;

export function createDeliveryEngineActivities({
  orm,
  mailer,
  config,
  listener,
  handoff,
  foreground,
}: {
  orm: Orm;
  mailer: Mailer;
  config: Config;
  listener: OutboxListener;
  handoff: DeliveryHandoff;
  foreground?: Foreground;
}) {
  const { concurrency, leaseSeconds, yieldSeconds } = config.delivery;
  // With the API in this process, its bursts go first (foreground.ts); every round here shares the budget.
  const yielding = foreground && yieldSeconds > 0 ? new BurstYield(foreground, yieldSeconds * 1000) : undefined;
  // A retry workflow may wait the longest backoff between attempts; its lease outlasts that.
  const handoffLeaseSeconds = config.sendRetryMaxIntervalSeconds + 120;
  // Every round in this process (one per engine it runs) claims and marks in shared statements.
  const statements = new EngineStatements(orm.em.fork());

  return {
    /**
     * One round of the delivery engine of a task queue: claims due emails in batches (the next
     * batch while the current one sends), sends them over the worker's pooled mailer with
     * `DELIVERY_CONCURRENCY` in flight, and records each result as the relay answers — SENT right
     * after its 250 (batched with whatever else was accepted meanwhile), FAILED with a 5xx reply,
     * handed to a retry workflow on a 4xx. Idle, it sleeps until a writer's NOTIFY. Heartbeats
     * throughout, so a dead worker's round is retried elsewhere within seconds; its claims run out
     * after `DELIVERY_LEASE_SECONDS` and are claimed again.
     *
     * When the relay cannot be reached (relayUnreachable), nothing more is sent and the sends in
     * flight are awaited: if the relay answered none of them, it is down, and every email the
     * round holds goes back to QUEUED (no attempt counted, the error saying why) and the round
     * reports it, so the workflow waits and probes instead of starting a retry workflow per email.
     * If it answered some, those emails failed on their own, and they go to retry workflows.
     *
     * The duplicate window is SMTP's own: an email the relay accepted whose SENT was not yet
     * written when the worker died (or could not be written before its lease ran out) is sent
     * again by the engine that claims it next.
     */
    async deliverQueuedEmails(input: DeliveryRoundInput): Promise<DeliveryRoundResult> {
      const ctx = Context.current();
      // Every idle lane waits on the cancellation signal with its own listener.
      setMaxListeners(concurrency + 10, ctx.cancellationSignal);
      const em = orm.em.fork();
      await adoptUnassignedEmails(em, input.queue);
      const key = `emails:${input.queue}`;
      const handedKey = handoffKey(input.queue);
      const deadline = Date.now() + input.maxSeconds * 1000;
      const probing = input.probe !== undefined;
      const batchSize = input.probe ?? concurrency * 4;
      const queued: EmailForDelivery[] = [];
      const inFlight = new Set<string>();
      const retries: (RetryHandoff & { at: number })[] = [];
      // Emails the relay could not be reached for, held until the sends in flight tell whether the relay or the email is at fault.
      const unreached: { emailId: string; projectId: string; error: string; at: Date }[] = [];
      // A reply of the relay (any code) after such a failure: it is up, and those emails failed on their own.
      let answeredSinceUnreached = false;
      const marks = new SentMarks<SentMark>((m) => statements.markSent(m), (leaseSeconds * 1000) / 2);
      let failed = 0;
      let claiming: Promise<number> | undefined;
      let expiredCheckedAt = 0;
      let claimedAt = 0;
      const claim = () =>
        (claiming ??= (async () => {
          claimedAt = Date.now();
          const claimed = await statements.claim({ queue: input.queue, limit: batchSize, leaseSeconds, which: 'queued' });
          // Expired leases (a dead worker's emails) are rare: looked for when the queue runs short, at most once a second.
          if (claimed.length < batchSize && Date.now() - expiredCheckedAt > EXPIRED_CHECK_MS) {
            expiredCheckedAt = Date.now();
            claimed.push(...(await statements.claim({ queue: input.queue, limit: batchSize - claimed.length, leaseSeconds, which: 'expired' })));
          }
          queued.push(...claimed);
          return claimed.length;
        })().finally(() => (claiming = undefined)));

      const sendOne = async (c: EmailForDelivery) => {
        const id = c.email.id;
        // A suppressed address (db/contacts/suppressions.ts) or a disabled project (db/projects/security.ts) fails, it is not held.
        if (c.suppressed || c.projectDisabled) {
          await markEmailFailed(em, id, c.suppressed ? SUPPRESSED_ERROR : PROJECT_DISABLED_ERROR);
          failed += 1;
          return;
        }
        inFlight.add(id);
        try {
          // Inside: a key that cannot be read is this email's failure, not the round's.
          const dkim = c.dkim && { domainName: c.dkim.domain, keySelector: c.dkim.selector, privateKey: dkimKeyObject(c.dkim.privateKeyPem) };
          const result = await mailer.send(composeMessage(c.email, dkim));
          marks.add({ emailId: id, smtpResponse: result.response });
          if (unreached.length > 0) answeredSinceUnreached = true;
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          if (relayUnreachable(err)) {
            unreached.push({ emailId: id, projectId: c.projectId, error: message, at: new Date() });
          } else {
            if (unreached.length > 0 && err instanceof SmtpError && err.responseCode !== undefined) answeredSinceUnreached = true;
            if (err instanceof SmtpError && err.permanent) {
              await markEmailFailed(em, id, message, message);
              failed += 1;
            } else {
              await handOff(id, c.projectId, message, err instanceof SmtpError ? message : null);
            }
          }
        } finally {
          inFlight.delete(id);
        }
      };
      const handOff = async (emailId: string, projectId: string, error: string, relayResponse: string | null) => {
        await handOffForRetry(em, emailId, error, relayResponse, handoffLeaseSeconds);
        retries.push({ emailId, projectId, at: Date.now() });
      };

      // The first error (PostgreSQL gone, say) ends the round for every lane; the activity then fails and is retried.
      let failure: { error: unknown } | undefined;
      const roundOver = () =>
        !!failure ||
        ctx.cancellationSignal.aborted ||
        !!marks.failure ||
        // Nothing new goes to a relay that may be down; the lanes end as their sends settle.
        unreached.length > 0 ||
        Date.now() > deadline ||
        (retries.length > 0 && Date.now() - retries[0]!.at > HANDOFF_AFTER_MS);
      const lane = async () => {
        // Whether to claim from the table before waiting: not after a wake-up for handed-off emails only.
        let lookInTable = true;
        while (!roundOver()) {
          if (yielding && !probing) {
            await yielding.turn(ctx.cancellationSignal);
            if (roundOver()) return;
          }
          const claimed = queued.shift();
          const next = claimed ?? (probing ? undefined : handoff.take(input.queue));
          if (next) {
            // Claim the next batch ahead only while the table has a backlog; handed-off emails say nothing of it.
            if (claimed && !probing && queued.length < batchSize / 2 && !claiming) void claim().catch(() => undefined);
            await sendOne(next);
            continue;
          }
          // A probe sends what it claimed once, no more.
          if (probing || retries.length > 0) return;
          const seen = listener.generation(key);
          const seenHanded = listener.generation(handedKey);
          // Without a NOTIFY, the table is looked at about once a second all the same (expired leases, claims given back).
          if ((lookInTable || Date.now() - claimedAt > IDLE_WAIT_MS) && ((await claim()) > 0 || queued.length > 0)) continue;
          // Idle: whatever a burst held back is sent, and the next burst may hold the lanes back again.
          yielding?.drained();
          const wait = Math.min(IDLE_WAIT_MS, Math.max(0, deadline - Date.now()));
          await listener.waitAny({ [key]: seen, [handedKey]: seenHanded }, wait, ctx.cancellationSignal);
          // A NOTIFY, or the wait ran out: look in the table again.
          lookInTable = listener.generation(key) !== seen || listener.generation(handedKey) === seenHanded;
        }
      };

      const beat = setInterval(() => ctx.heartbeat(), 1000);
      // Everything the round holds keeps its lease: sending, waiting to be sent, held, or accepted and not yet marked.
      const holding = () => [
        ...inFlight,
        ...queued.map((c) => c.email.id),
        ...handoff.waiting(input.queue),
        ...unreached.map((u) => u.emailId),
        ...marks.unwritten().map((m) => m.emailId),
      ];
      const renew = setInterval(() => void renewLeases(em, holding(), leaseSeconds).catch(() => undefined), (leaseSeconds * 1000) / 3);
      // A probing round takes nothing handed off: while the relay may be down, the API writes QUEUED.
      const capacity = yielding ? Math.max(batchSize, HANDOFF_WHILE_YIELDING) : batchSize;
      const closeHandoff = probing ? () => [] : handoff.open(input.queue, capacity, () => listener.wakeOne(handedKey));
      try {
        if (probing) await claim();
        const lanes = probing ? Math.min(concurrency, queued.length) : concurrency;
        await Promise.all(Array.from({ length: lanes }, () => lane().catch((error: unknown) => void (failure ??= { error }))));
      } catch (error) {
        failure ??= { error };
      }
      // Handed-off emails nobody took go back with this round's own unsent claims.
      queued.push(...closeHandoff());
      let relayDown: DeliveryRoundResult['relayUnreachable'];
      try {
        await claiming?.catch(() => undefined);
        // Claimed but not started (the round ended, or failed): free for the next claim at once.
        const unsent = queued.splice(0).map((c) => c.email.id);
        const held = unreached.splice(0);
        if (held.length > 0 && !answeredSinceUnreached) {
          relayDown = { since: held[0]!.at.toISOString(), error: held[held.length - 1]!.error };
          await releaseClaims(em, [...held.map((u) => u.emailId), ...unsent], `Relay unreachable: ${relayDown.error}`).catch(() => undefined);
        } else {
          await releaseClaims(em, unsent).catch(() => undefined);
          // The relay answered meanwhile: it is up, and these emails are retried one by one.
          for (const u of held) await handOff(u.emailId, u.projectId, u.error, u.error);
        }
        await marks.drain();
      } catch (error) {
        failure ??= { error };
      } finally {
        clearInterval(renew);
        clearInterval(beat);
      }
      if (failure) throw failure.error;
      return {
        sent: marks.written,
        failed,
        retries: retries.map(({ emailId, projectId }) => ({ emailId, projectId })),
        ...(relayDown ? { relayUnreachable: relayDown } : {}),
      };
    },
  };
}

export type DeliveryEngineActivities = ReturnType<typeof createDeliveryEngineActivities>;
