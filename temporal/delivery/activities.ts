import { setMaxListeners } from 'node:events';
import { Context } from '@temporalio/activity';
import type { Config } from '../../config';
import { BurstYield, type Foreground } from '../../foreground';
import { handoffKey, type DeliveryHandoff } from '../../db/messages/delivery-handoff';
import { adoptUnassignedEmails, handOffForRetry, releaseClaims, renewLeases, type SentMark } from '../../db/messages/delivery-queue';
import { EngineStatements } from '../../db/messages/engine-statements';
import { ProjectTurns } from '../../db/messages/project-turns';
import { throttledProjects } from '../../db/messages/send-throttle';
import { type EmailForDelivery, markEmailFailed, refuseClaimedEmail } from '../../db/messages/emails';
import { recordRelayBounces } from '../../db/messages/engagement';
import type { Orm } from '../../db/orm';
import type { OutboxListener } from '../../db/messages/outbox-listener';
import { PROJECT_DISABLED_ERROR } from '../../db/projects/security';
import { SUPPRESSED_ERROR } from '../../db/contacts/suppressions';
import { sendStoredEmail } from '../../mail/send-stored';
import { retryLeaseSeconds } from '../delivery-options';
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
  /** Not sent: suppressed, the project disabled, or refused for good without a bounce (a `rejected` outcome). */
  failed: number;
  /** Hard bounces: the relay refused the recipient (recorded as recordRelayBounces does). */
  bounced: number;
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
/** The least an idle lane waits for a throttled project's next slot, so a clock's rounding never spins it. */
const THROTTLE_MIN_WAIT_MS = 10;
/** How often a round reads which projects are throttled: their emails are then no longer handed off. */
const THROTTLE_READ_MS = 1000;
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
  const handoffLeaseSeconds = retryLeaseSeconds(config);
  // Every round in this process (one per engine it runs) claims and marks in shared statements.
  const statements = new EngineStatements(orm.em.fork());

  return {
    /**
     * One round of the delivery engine of a task queue: claims due emails in batches (the next
     * batch while the current one sends), sends them over the worker's pooled mailer with
     * `DELIVERY_CONCURRENCY` in flight, and records each result as the relay answers
     * (mail/send-stored.ts) — SENT right after its 250 (batched with whatever else was
     * accepted meanwhile), BOUNCED (hard, the address suppressed) when the relay refuses the
     * recipient for good, FAILED for any other 5xx, handed to a retry workflow on a 4xx. Idle, it
     * sleeps until a writer's NOTIFY. Heartbeats throughout, so a dead worker's round is retried
     * elsewhere within seconds; its claims run out after `DELIVERY_LEASE_SECONDS` and are claimed again.
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
      // Claimed and not yet started: taken project by project in turn, as the claim took them.
      const queued = new ProjectTurns<EmailForDelivery>((c) => c.projectId);
      const inFlight = new Set<string>();
      const retries: (RetryHandoff & { at: number })[] = [];
      // Emails the relay could not be reached for, held until the sends in flight tell whether the relay or the email is at fault.
      const unreached: { emailId: string; projectId: string; error: string; at: Date }[] = [];
      // A reply of the relay (any code) after such a failure: it is up, and those emails failed on their own.
      let answeredSinceUnreached = false;
      const marks = new SentMarks<SentMark>((m) => statements.markSent(m), (leaseSeconds * 1000) / 2);
      let failed = 0;
      let bounced = 0;
      let claiming: Promise<number> | undefined;
      let expiredCheckedAt = 0;
      let claimedAt = 0;
      // When a throttled project the last claim left waiting has a free slot (Date.now() time).
      let throttledUntil: number | undefined;
      const claim = () =>
        (claiming ??= (async () => {
          claimedAt = Date.now();
          const { emails: claimed, throttledForMs } = await statements.claim({ queue: input.queue, limit: batchSize, leaseSeconds, which: 'queued' });
          throttledUntil = throttledForMs === null ? undefined : claimedAt + throttledForMs;
          // Expired leases (a dead worker's emails) are rare: looked for when the queue runs short, at most once a second.
          if (claimed.length < batchSize && Date.now() - expiredCheckedAt > EXPIRED_CHECK_MS) {
            expiredCheckedAt = Date.now();
            const expired = await statements.claim({ queue: input.queue, limit: batchSize - claimed.length, leaseSeconds, which: 'expired' });
            claimed.push(...expired.emails);
          }
          queued.push(...claimed);
          return claimed.length;
        })().finally(() => (claiming = undefined)));
      const throttleDue = () => throttledUntil !== undefined && Date.now() >= throttledUntil;
      const throttleWait = () => (throttledUntil === undefined ? IDLE_WAIT_MS : Math.max(THROTTLE_MIN_WAIT_MS, throttledUntil - Date.now()));
      // The table's claims and the hand-off take turns, so a backlog in either holds back none of the other's emails.
      let handoffTurn = false;
      const takeNext = (): { email: EmailForDelivery; fromTable: boolean } | undefined => {
        handoffTurn = !handoffTurn && !probing;
        const handed = handoffTurn ? handoff.take(input.queue) : undefined;
        if (handed) return { email: handed, fromTable: false };
        const claimed = queued.shift();
        if (claimed) return { email: claimed, fromTable: true };
        const late = probing ? undefined : handoff.take(input.queue);
        return late && { email: late, fromTable: false };
      };

      const sendOne = async (c: EmailForDelivery) => {
        const id = c.email.id;
        // A suppressed address (db/contacts/suppressions.ts) or a disabled project (db/projects/security.ts) fails, it is not held.
        if (c.suppressed || c.projectDisabled) {
          await refuseClaimedEmail(em, id, c.suppressed ? SUPPRESSED_ERROR : PROJECT_DISABLED_ERROR);
          failed += 1;
          return;
        }
        inFlight.add(id);
        try {
          const outcome = await sendStoredEmail(mailer, c.email, c.dkim);
          if (unreached.length > 0 && outcome.kind !== 'unreachable' && (outcome.kind !== 'transient' || outcome.answered)) answeredSinceUnreached = true;
          switch (outcome.kind) {
            case 'sent':
              marks.add({ emailId: id, smtpResponse: outcome.reply });
              break;
            case 'bounced':
              await recordRelayBounces(em, [{ emailId: id, reply: outcome.reply }]);
              bounced += 1;
              break;
            case 'rejected':
              await markEmailFailed(em, id, outcome.reply, outcome.reply);
              failed += 1;
              break;
            case 'transient':
              await handOff(id, c.projectId, outcome.message, outcome.reply);
              break;
            case 'unreachable':
              unreached.push({ emailId: id, projectId: c.projectId, error: outcome.reply, at: new Date() });
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
          const next = takeNext();
          if (next) {
            // Claim the next batch ahead only while the table has a backlog; handed-off emails say nothing of it.
            if (next.fromTable && !probing && queued.length < batchSize / 2 && !claiming) void claim().catch(() => undefined);
            await sendOne(next.email);
            continue;
          }
          // A probe sends what it claimed once, no more.
          if (probing || retries.length > 0) return;
          const seen = listener.generation(key);
          const seenHanded = listener.generation(handedKey);
          // Without a NOTIFY, the table is looked at about once a second all the same (expired leases, claims given back).
          // A throttled project's emails wait in the table until its next slot, when the lanes look again.
          if ((lookInTable || Date.now() - claimedAt > IDLE_WAIT_MS || throttleDue()) && ((await claim()) > 0 || queued.length > 0)) continue;
          // Idle: whatever a burst held back is sent, and the next burst may hold the lanes back again.
          yielding?.drained();
          const wait = Math.min(IDLE_WAIT_MS, throttleWait(), Math.max(0, deadline - Date.now()));
          await listener.waitAny({ [key]: seen, [handedKey]: seenHanded }, wait, ctx.cancellationSignal);
          // A NOTIFY, or the wait ran out: look in the table again.
          lookInTable = listener.generation(key) !== seen || listener.generation(handedKey) === seenHanded;
        }
      };

      const beat = setInterval(() => ctx.heartbeat(), 1000);
      // Everything the round holds keeps its lease: sending, waiting to be sent, held, or accepted and not yet marked.
      const holding = () => [
        ...inFlight,
        ...queued.items().map((c) => c.email.id),
        ...handoff.waiting(input.queue),
        ...unreached.map((u) => u.emailId),
        ...marks.unwritten().map((m) => m.emailId),
      ];
      const renew = setInterval(() => void renewLeases(em, holding(), leaseSeconds).catch(() => undefined), (leaseSeconds * 1000) / 3);
      // Read before the hand-off opens: no email of a throttled project is handed to this round.
      const readThrottles = () => throttledProjects(em).then((ids) => handoff.setThrottled(ids), () => undefined);
      await readThrottles();
      const throttles = setInterval(() => void readThrottles(), THROTTLE_READ_MS);
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
        const unsent = queued.drain().map((c) => c.email.id);
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
        clearInterval(throttles);
        clearInterval(beat);
      }
      if (failure) throw failure.error;
      return {
        sent: marks.written,
        failed,
        bounced,
        retries: retries.map(({ emailId, projectId }) => ({ emailId, projectId })),
        ...(relayDown ? { relayUnreachable: relayDown } : {}),
      };
    },
  };
}

export type DeliveryEngineActivities = ReturnType<typeof createDeliveryEngineActivities>;
