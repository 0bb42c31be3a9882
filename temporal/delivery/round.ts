import type { EntityManager } from '@mikro-orm/postgresql';
import { SUPPRESSED_ERROR } from '../../db/contacts/suppressions';
import { adoptUnassignedEmails, claimDueEmails, leaseForRetry, releaseClaims, renewLeases, type SentMark } from '../../db/messages/delivery-queue';
import { type EmailForDelivery, markEmailFailed, refuseClaimedEmail } from '../../db/messages/emails';
import { recordRelayBounces } from '../../db/messages/engagement';
import { PROJECT_DISABLED_ERROR } from '../../db/projects/security';
import { sendStoredEmail } from '../../mail/send-stored';
import type { Mailer } from '../../mail/transport';
import { emailsKey, type OutboxListener } from '../wakeups';
import { type MarkStatements, SentMarks } from './sent-marks';
import type { DeliveryTuning } from './tuning';

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

/** An email that got a transient failure: the workflow starts its retry workflow. */
export interface EmailToRetry {
  emailId: string;
  projectId: string;
}

export interface DeliveryRoundResult {
  sent: number;
  /** Not sent: suppressed, the project disabled, or refused for good without a bounce (a `rejected` outcome). */
  failed: number;
  /** Hard bounces: the relay refused the recipient (recorded as recordRelayBounces does). */
  bounced: number;
  retries: EmailToRetry[];
  /**
   * The relay itself could not be reached, and it answered nothing meanwhile: the round stopped
   * and gave every email it held back as QUEUED, none passed to a retry workflow. The engine
   * opens its breaker (temporal/delivery/workflow.ts).
   */
  relayUnreachable?: { since: string; error: string };
}

export interface RoundDeps {
  em: EntityManager;
  /** SENT marks, written in statements shared with the other rounds of this process. */
  marks: MarkStatements;
  mailer: Mailer;
  listener: OutboxListener;
  tuning: DeliveryTuning;
  /** How long the retry workflow's lease on an email lasts (temporal/delivery-options.ts). */
  retryLeaseSeconds: number;
}

/**
 * One round of a delivery engine, read top to bottom in `run`: take work (claim due emails from
 * the table, the next batch while this one sends), send it (DELIVERY_CONCURRENCY lanes, each email
 * through mail/send-stored.ts, its outcome recorded as the relay answers), close (give back what
 * was claimed and not sent, write the last SENT marks). Every email the round holds keeps its
 * lease while it holds it.
 *
 * A claim that took less than it asked for found the queue drained: the round claims again once a
 * wake-up (temporal/wakeups.ts) has come since, and meanwhile only sends what it holds. Under a
 * steady stream of requests each claim then takes what the writers committed between two
 * wake-ups, instead of the one or two emails that arrived during the last claim.
 *
 * The round ends at its deadline, when cancelled, on the first error (the activity fails and is
 * retried), when the relay cannot be reached, or soon after an email needs its retry workflow,
 * which the engine workflow starts from the round's result.
 */
export class DeliveryRound {
  private readonly key: string;
  private readonly deadline: number;
  private readonly probing: boolean;
  private readonly batch: number;
  /** Claimed and not yet started, in claim order: the claim gave every project with queued mail its turn. */
  private claimed: EmailForDelivery[] = [];
  private readonly inFlight = new Set<string>();
  private readonly marks: SentMarks<SentMark>;
  private readonly retries: (EmailToRetry & { at: number })[] = [];
  /** Emails the relay could not be reached for, held until the sends in flight tell whether the relay or the email is at fault. */
  private readonly unreached: { emailId: string; projectId: string; error: string; at: Date }[] = [];
  /** The relay answered something after such a failure: it is up, and those emails failed on their own. */
  private answeredSinceUnreached = false;
  private failed = 0;
  private bounced = 0;
  private failure: { error: unknown } | undefined;
  private claiming: Promise<number> | undefined;
  /** The wake-up count read before the last claim that found the queue drained; undefined when the last claim took a full batch. */
  private drainedAt: number | undefined;
  private expiredCheckedAt = 0;
  /** When a throttled project the last claim left waiting has a free slot (Date.now() time). */
  private throttledUntil: number | undefined;

  constructor(
    private readonly deps: RoundDeps,
    private readonly input: DeliveryRoundInput,
    private readonly signal: AbortSignal,
  ) {
    this.key = emailsKey(input.queue);
    this.deadline = Date.now() + input.maxSeconds * 1000;
    this.probing = input.probe !== undefined;
    this.batch = input.probe ?? deps.tuning.claimBatch;
    this.marks = new SentMarks<SentMark>((m) => deps.marks.write(m), (deps.tuning.leaseSeconds * 1000) / 2);
  }

  async run(): Promise<DeliveryRoundResult> {
    const { em, tuning } = this.deps;
    await adoptUnassignedEmails(em, this.input.queue);
    const renew = setInterval(() => void renewLeases(em, this.holding(), tuning.leaseSeconds).catch(() => undefined), (tuning.leaseSeconds * 1000) / 3);
    try {
      // Take work and send it.
      if (this.probing) await this.claim();
      const lanes = this.probing ? Math.min(tuning.concurrency, this.claimed.length) : tuning.concurrency;
      await Promise.all(Array.from({ length: lanes }, () => this.lane().catch((error: unknown) => void (this.failure ??= { error }))));
    } catch (error) {
      this.failure ??= { error };
    }
    // Close.
    let relayUnreachable: DeliveryRoundResult['relayUnreachable'];
    try {
      relayUnreachable = await this.giveBackUnsent();
      await this.marks.drain();
    } catch (error) {
      this.failure ??= { error };
    } finally {
      clearInterval(renew);
    }
    if (this.failure) throw this.failure.error;
    return {
      sent: this.marks.written,
      failed: this.failed,
      bounced: this.bounced,
      retries: this.retries.map(({ emailId, projectId }) => ({ emailId, projectId })),
      ...(relayUnreachable ? { relayUnreachable } : {}),
    };
  }

  /** One of the round's DELIVERY_CONCURRENCY lanes: sends claimed emails one after another until the round is over. */
  private async lane(): Promise<void> {
    while (!this.over()) {
      const email = this.claimed.shift();
      if (email) {
        // The next batch is claimed while this one sends.
        if (!this.probing && this.claimed.length < this.batch / 2 && !this.claiming && !this.drained()) void this.claim().catch(() => undefined);
        await this.send(email);
        continue;
      }
      // A probe sends what it claimed, once; a round with an email for a retry workflow ends.
      if (this.probing || this.retries.length > 0) return;
      if (this.drained() && !this.claiming) await this.deps.listener.wait(this.key, this.drainedAt!, this.idleWaitMs(), this.signal);
      if (!this.over()) await this.claim();
    }
  }

  /** The last claim found the queue drained and no wake-up has come since: nothing new to claim yet. */
  private drained(): boolean {
    return this.drainedAt !== undefined && this.deps.listener.generation(this.key) === this.drainedAt;
  }

  private over(): boolean {
    return (
      !!this.failure ||
      this.signal.aborted ||
      !!this.marks.failure ||
      // Nothing new goes to a relay that may be down; the lanes end as their sends settle.
      this.unreached.length > 0 ||
      Date.now() > this.deadline ||
      (this.retries.length > 0 && Date.now() - this.retries[0]!.at > this.deps.tuning.retryAfterMs)
    );
  }

  /** Claims the next batch (one claim at a time per round; concurrent callers share it): how many it took. */
  private claim(): Promise<number> {
    this.claiming ??= (async () => {
      const { em, tuning } = this.deps;
      const { queue } = this.input;
      const claimedAt = Date.now();
      // Read before the claim: a writer that commits after the claim's snapshot wakes the engines after this.
      const seen = this.deps.listener.generation(this.key);
      const { emails, throttledForMs } = await claimDueEmails(em, queue, this.batch, tuning.leaseSeconds, 'queued');
      this.drainedAt = emails.length < this.batch ? seen : undefined;
      this.throttledUntil = throttledForMs === null ? undefined : claimedAt + throttledForMs;
      // Expired leases (a dead worker's emails) are rare: looked for when the queue runs short, at most once a second.
      if (emails.length < this.batch && Date.now() - this.expiredCheckedAt > tuning.expiredCheckMs) {
        this.expiredCheckedAt = Date.now();
        emails.push(...(await claimDueEmails(em, queue, this.batch - emails.length, tuning.leaseSeconds, 'expired')).emails);
      }
      this.claimed.push(...emails);
      return emails.length;
    })().finally(() => (this.claiming = undefined));
    return this.claiming;
  }

  /** How long an idle lane waits for a wake-up: a throttled project's next slot may come sooner. */
  private idleWaitMs(): number {
    const { idleWaitMs, throttleMinWaitMs } = this.deps.tuning;
    const throttled = this.throttledUntil === undefined ? idleWaitMs : Math.max(throttleMinWaitMs, this.throttledUntil - Date.now());
    return Math.max(0, Math.min(idleWaitMs, throttled, this.deadline - Date.now()));
  }

  /** Sends one claimed email and records what the relay answered. */
  private async send(c: EmailForDelivery): Promise<void> {
    const { em } = this.deps;
    const id = c.email.id;
    // A suppressed address (db/contacts/suppressions.ts) or a disabled project (db/projects/security.ts) fails, it is not held.
    if (c.suppressed || c.projectDisabled) {
      await refuseClaimedEmail(em, id, c.suppressed ? SUPPRESSED_ERROR : PROJECT_DISABLED_ERROR);
      this.failed += 1;
      return;
    }
    this.inFlight.add(id);
    try {
      const outcome = await sendStoredEmail(this.deps.mailer, c.email, c.dkim);
      if (this.unreached.length > 0 && outcome.kind !== 'unreachable' && (outcome.kind !== 'transient' || outcome.answered)) this.answeredSinceUnreached = true;
      switch (outcome.kind) {
        case 'sent':
          this.marks.add({ emailId: id, smtpResponse: outcome.reply });
          break;
        case 'bounced':
          await recordRelayBounces(em, [{ emailId: id, reply: outcome.reply }]);
          this.bounced += 1;
          break;
        case 'rejected':
          await markEmailFailed(em, id, outcome.reply, outcome.reply);
          this.failed += 1;
          break;
        case 'transient':
          await this.retry(id, c.projectId, outcome.message, outcome.reply);
          break;
        case 'unreachable':
          this.unreached.push({ emailId: id, projectId: c.projectId, error: outcome.reply, at: new Date() });
      }
    } finally {
      this.inFlight.delete(id);
    }
  }

  /** The email leaves the round for its own retry workflow, which the engine starts from the result. */
  private async retry(emailId: string, projectId: string, error: string, relayResponse: string | null): Promise<void> {
    await leaseForRetry(this.deps.em, emailId, error, relayResponse, this.deps.retryLeaseSeconds);
    this.retries.push({ emailId, projectId, at: Date.now() });
  }

  /**
   * Claimed and not started: free for the next claim at once. If the relay could not be reached and
   * answered nothing since, it is down: the emails held for it go back too, and the round says so.
   */
  private async giveBackUnsent(): Promise<DeliveryRoundResult['relayUnreachable']> {
    await this.claiming?.catch(() => undefined);
    const unsent = this.claimed.splice(0).map((c) => c.email.id);
    const held = this.unreached.splice(0);
    if (held.length > 0 && !this.answeredSinceUnreached) {
      const down = { since: held[0]!.at.toISOString(), error: held[held.length - 1]!.error };
      await releaseClaims(this.deps.em, [...held.map((u) => u.emailId), ...unsent], `Relay unreachable: ${down.error}`).catch(() => undefined);
      return down;
    }
    await releaseClaims(this.deps.em, unsent).catch(() => undefined);
    // The relay answered meanwhile: it is up, and these emails are retried one by one.
    for (const u of held) await this.retry(u.emailId, u.projectId, u.error, u.error);
    return undefined;
  }

  /** Everything the round holds keeps its lease: sending, waiting to be sent, held, or accepted and not yet marked. */
  private holding(): string[] {
    return [
      ...this.inFlight,
      ...this.claimed.map((c) => c.email.id),
      ...this.unreached.map((u) => u.emailId),
      ...this.marks.unwritten().map((m) => m.emailId),
    ];
  }
}
