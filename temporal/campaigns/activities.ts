import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Config } from '../../config';
import {
  type BeginOutcome,
  beginCampaignSend,
  campaignSourceKey,
  type Recipient,
  finishCampaign,
  loadRecipientBatch,
  loadSendingCampaign,
  markCampaignEmailsBounced,
  markCampaignEmailsFailed,
  deferCampaignEmails,
  markCampaignEmailsSent,
  type SentMark,
  settleRecipients,
} from '../../db/campaigns/send';
import type { CampaignStatus } from '../../db/campaigns/campaigns';
import { loadDomainKeys } from '../../db/domains/domains';
import type { Orm } from '../../db/orm';
import { type EmailPlan, planEmails, type PreparedEmail, prepareEmail, type WrittenEmail, writeEmails } from '../../db/messages/prepare';
import { campaignSendStatusSql, cancelCampaignIfProjectDisabled } from '../../db/projects/security';
import { linkSigningSecret } from '../../db/projects/secrets';
import { releaseSendSlots, reserveSendSlots, throttleRate } from '../../db/messages/send-throttle';
import type { RelayRefusal } from '../../db/messages/engagement';
import { queryOne, transaction } from '../../db/sql';
import { suppressedAmong } from '../../db/contacts/suppressions';
import { AppError } from '../../errors';
import type { StoredEmail } from '../../mail/compose';
import { sendStoredEmail } from '../../mail/send-stored';
import type { SendOutcome } from '../../mail/smtp-errors';
import type { Mailer } from '../../mail/transport';
import { SentMarks } from '../delivery/sent-marks';
import { permanent, refusalFailure } from '../failures';

export interface CampaignBatchInput {
  campaignId: string;
  /** Contact id the batch starts after (keyset cursor); null for the first batch. */
  after: string | null;
  batchSize: number;
  /** Emails in flight at once over the worker's pooled mailer. */
  concurrency: number;
  /** No new recipient is started after this long, so a slow throttle keeps each activity short. */
  maxBatchSeconds: number;
}

export interface CampaignBatchResult {
  /** The last recipient this batch settled; the next batch starts after it. */
  cursor: string | null;
  /** Every recipient of the campaign is settled. */
  done: boolean;
  /** The campaign is no longer SENDING (cancelled or deleted meanwhile): send nothing more. */
  stopped: boolean;
  sent: number;
  skipped: number;
  /** Refused for good without a bounce (a `rejected` outcome, mail/smtp-errors.ts). */
  failed: number;
  /** Hard bounces: the relay refused the recipient. */
  bounced: number;
}

/**
 * One batch at a time per campaign, whatever Temporal believes: an attempt whose heartbeat timed
 * out (a stalled event loop, a network split) may still be sending, and its retry must not send
 * the same recipients beside it. The lock is a transaction-level advisory lock held for the
 * batch; a killed worker's connection drops and Postgres releases it at once.
 */
async function withSendLock<T>(orm: Orm, campaignId: string, work: () => Promise<T>): Promise<T> {
  return transaction(orm.em.fork(), async (tx) => {
    const got = await queryOne<{ ok: boolean }>(tx, 'select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as ok', [
      `campaign-send:${campaignId}`,
    ]);
    if (!got?.ok) throw ApplicationFailure.retryable('Another attempt is still sending this campaign', 'CampaignBusy');
    return work();
  });
}

/** Sleeps in slices, heartbeating between them; rejects when the activity is cancelled. */
async function pause(ms: number): Promise<void> {
  const ctx = Context.current();
  for (let left = ms; left > 0; left -= 1000) {
    ctx.heartbeat();
    await ctx.sleep(Math.min(left, 1000));
  }
}

/** The campaign's status, or PROJECT_DISABLED once its project is disabled (campaignSendStatusSql). */
type SendStatus = CampaignStatus | 'PROJECT_DISABLED';

/**
 * Send permits from the project's throttle, reserved `chunk` at a time and shared by the batch's
 * lanes. Each reservation also reads the campaign's status, so a cancel stops the lanes within
 * one chunk; a campaign no longer SENDING ends the permits.
 */
class Pacer {
  private available = 0;
  private refilling: Promise<void> | undefined;
  reserved = 0;
  used = 0;
  stopped = false;

  constructor(private readonly reserve: (n: number) => Promise<{ waitMs: number; status: SendStatus | undefined }>, private readonly chunk: number) {}

  /** A permit to send one email now, or false when the campaign stopped. */
  async take(remaining: number): Promise<boolean> {
    for (;;) {
      if (this.stopped) return false;
      if (this.available > 0) {
        this.available -= 1;
        this.used += 1;
        return true;
      }
      this.refilling ??= this.refill(Math.max(1, Math.min(this.chunk, remaining))).finally(() => (this.refilling = undefined));
      await this.refilling;
    }
  }

  private async refill(n: number): Promise<void> {
    Context.current().heartbeat();
    const r = await this.reserve(n);
    this.reserved += n;
    if (r.status !== 'SENDING') {
      this.stopped = true;
      return;
    }
    if (r.waitMs > 0) await pause(r.waitMs);
    this.available += n;
  }
}

/** One recipient of a batch, in cursor order: an email to send, or nothing left to do. */
interface Item {
  contactId: string;
  email: StoredEmail | undefined;
}

/** What a batch sends: the row as written (an earlier attempt's content, if it wrote it). */
function storedEmail(plan: EmailPlan, w: WrittenEmail): StoredEmail {
  return {
    id: w.id,
    toEmail: w.toEmail,
    toName: null,
    fromEmail: plan.from.email,
    fromName: plan.from.name,
    replyTo: plan.replyTo,
    subject: w.subject,
    body: w.body,
    headers: w.headers,
    attachments: [],
  };
}

export function createCampaignActivities({ orm, mailer, config }: { orm: Orm; mailer: Mailer; config: Config }) {
  let linkSecret: Promise<string> | undefined;
  const secret = () => (linkSecret ??= linkSigningSecret(orm.em.fork(), config.jwtSecret));

  return {
    /** SCHEDULED → SENDING when due, and the audience snapshot (once). */
    async beginCampaignSend(input: { campaignId: string }): Promise<BeginOutcome> {
      return permanent(beginCampaignSend(orm.em.fork(), input.campaignId));
    },

    async finishCampaign(input: { campaignId: string; outcome: 'SENT' | 'CANCELLED'; error?: string }): Promise<string> {
      return finishCampaign(orm.em.fork(), input.campaignId, input.outcome, input.error);
    },

    /**
     * Sends the next batch of a campaign: up to `batchSize` recipients after the cursor, read in
     * pages of up to 100 — the next page is rendered (campaign compiled once per batch) and its
     * email rows written (once per campaign + contact) while the current one sends — over
     * `concurrency` lanes on the worker's pooled mailer, paced by the project's throttle, DKIM-signed
     * with the domain's cached key, and marked SENT as the relay accepts.
     *
     * A retried batch (crash, timeout, relay down) sends no email twice that was marked: the
     * recipients and email rows already SENT are skipped. What remains is SMTP's own gap: an email
     * the relay accepted whose mark was not yet written when the worker died goes again (at most
     * the emails in flight plus one mark write, a few milliseconds of sending).
     */
    async sendCampaignBatch(input: CampaignBatchInput): Promise<CampaignBatchResult> {
      const ctx = Context.current();
      const em = orm.em.fork();
      const stoppedAt = (cursor: string | null): CampaignBatchResult => ({ cursor, done: false, stopped: true, sent: 0, skipped: 0, failed: 0, bounced: 0 });
      const campaign = await loadSendingCampaign(em, input.campaignId);
      if (!campaign || campaign.status !== 'SENDING') return stoppedAt(input.after);
      // A disabled project's campaign is cancelled rather than held (db/projects/security.ts).
      if (await cancelCampaignIfProjectDisabled(em, input.campaignId)) return stoppedAt(input.after);

      return withSendLock(orm, input.campaignId, async () => {
        const plan = await planEmails(
          em,
          {
            projectId: campaign.projectId,
            source: 'campaign',
            campaignId: input.campaignId,
            from: { email: campaign.fromEmail, name: campaign.fromName },
            replyTo: campaign.replyTo,
            subject: campaign.subject,
            body: campaign.body,
            // Opens and clicks feed the campaign's stats: tracked as /v1/send does, for marketing mail.
            marketing: campaign.marketing,
            // Its batches send the rows, not a delivery engine.
            queue: null,
            longLived: true,
          },
          { senders: config, links: { publicUrl: config.publicUrl, linkSecret: await secret() } },
        ).catch((err: unknown) => {
          // A domain that lost its verification pauses the send (retried with backoff) until it is
          // back; a body that does not compile will not pass on retry.
          if (err instanceof AppError && err.code === 'DOMAIN_NOT_VERIFIED') throw ApplicationFailure.retryable(err.message, err.code);
          throw refusalFailure(err);
        });
        const keys = await loadDomainKeys(em, plan.domainId);
        let skipped = 0;

        /** Renders a page's recipients still to send, writes their rows, settles the ones not to send to. */
        const prepare = async (recipients: Recipient[]): Promise<Item[]> => {
          // Not sent to: unsubscribed since the snapshot (marketing), or suppressed (a hard bounce
          // or a complaint, db/contacts/suppressions.ts).
          const pending = recipients.filter((r) => r.status === 'PENDING');
          const suppressed = await suppressedAmong(em, campaign.projectId, pending.map((r) => r.contact.email));
          const settled: Parameters<typeof settleRecipients>[3] = [];
          const prepared: PreparedEmail[] = [];
          for (const r of pending) {
            if ((campaign.marketing && !r.contact.subscribed) || suppressed.has(r.contact.email.toLowerCase())) {
              settled.push({ contactId: r.contact.id, status: 'SKIPPED', emailId: null });
              skipped += 1;
              continue;
            }
            // A retry renders with a new id but sends the row (and body) the first attempt wrote.
            prepared.push(prepareEmail(plan, r.contact, { sourceKey: campaignSourceKey(input.campaignId, r.contact.id) }));
          }
          const written = prepared.length ? await transaction(em, (tx) => writeEmails(tx, prepared, 'fail')) : [];
          const toSend = new Map<string, StoredEmail>();
          written.forEach((w, n) => {
            const contactId = prepared[n]!.contactId!;
            if (w.status === 'QUEUED' || w.status === 'SENDING') toSend.set(contactId, storedEmail(plan, w));
            // A row an earlier attempt settled already (its recipient was marked with it), or one over the cap.
            else settled.push({ contactId, status: w.status === 'FAILED' || w.status === 'BOUNCED' ? 'FAILED' : 'SENT', emailId: w.id });
          });
          await settleRecipients(em, campaign.projectId, input.campaignId, settled);
          return recipients.map((r) => ({ contactId: r.contact.id, email: toSend.get(r.contact.id) }));
        };

        // The work in cursor order, loaded a page ahead of the lanes.
        const page = Math.min(100, input.batchSize);
        const items: Item[] = [];
        const completed: boolean[] = [];
        let loadedUpTo = input.after;
        let requested = 0;
        let noMorePages = false;
        let endOfCampaign = false;
        let loading: Promise<void> | undefined;
        const loadPage = async () => {
          const limit = Math.min(page, input.batchSize - requested);
          const recipients = await loadRecipientBatch(em, input.campaignId, loadedUpTo, limit);
          const prepared = await prepare(recipients);
          // Only a page fully prepared moves the loader on (a failed one is loaded again).
          requested += limit;
          if (recipients.length < limit) endOfCampaign = true;
          if (endOfCampaign || requested >= input.batchSize) noMorePages = true;
          if (recipients.length) loadedUpTo = recipients[recipients.length - 1]!.contact.id;
          items.push(...prepared);
          completed.push(...prepared.map(() => false));
        };
        const load = () => (loading ??= loadPage().finally(() => (loading = undefined)));
        let next = 0;
        /** The index of the next item for a lane, or undefined when the batch has no more. */
        const takeItem = async (): Promise<number | undefined> => {
          for (;;) {
            if (next < items.length) {
              if (!noMorePages && items.length - next <= page / 2) void load().catch(() => undefined);
              return next++;
            }
            if (noMorePages && !loading) return undefined;
            await load();
          }
        };

        const defaultRate = config.sendThrottlePerSecond;
        const rate = await throttleRate(em, campaign.projectId, defaultRate);
        const pacer = new Pacer(async (n) => {
          const r = await reserveSendSlots<SendStatus>(em, campaign.projectId, n, defaultRate, campaignSendStatusSql(input.campaignId));
          return { waitMs: r.waitMs, status: r.extra };
        }, Math.max(1, Math.min(100, Math.floor(rate / 10))));
        const marks = new SentMarks<SentMark>((m) => markCampaignEmailsSent(em, campaign.projectId, input.campaignId, m));
        const failures: { emailId: string; contactId: string; error: string }[] = [];
        const bounces: RelayRefusal[] = [];
        const deferred: { emailId: string; error: string }[] = [];

        const deadline = Date.now() + input.maxBatchSeconds * 1000;
        let halt: { reason: 'stopped' | 'error'; error?: unknown } | undefined;
        const stop = (reason: 'stopped' | 'error', error?: unknown) => (halt ??= { reason, error });

        let lastBeat = 0;
        const lane = async () => {
          while (!halt) {
            if (ctx.cancellationSignal.aborted) return void stop('error', ctx.cancellationSignal.reason);
            if (marks.failure) return void stop('error', marks.failure);
            if (Date.now() > deadline) return;
            let i: number | undefined;
            try {
              i = await takeItem();
            } catch (err) {
              return void stop('error', err);
            }
            if (i === undefined || halt) return;
            const item = items[i]!;
            if (!item.email) {
              completed[i] = true;
              continue;
            }
            let outcome: SendOutcome;
            try {
              // The remaining count sizes the reservation: a small batch does not reserve a whole chunk.
              if (!(await pacer.take(items.length - i + (noMorePages ? 0 : page)))) return void stop('stopped');
              if (halt) return;
              const email = item.email;
              outcome = await sendStoredEmail(mailer, email, keys);
            } catch (err) {
              return void stop('error', err);
            }
            const emailId = item.email.id;
            if (outcome.kind === 'sent') marks.add({ emailId, contactId: item.contactId, smtpResponse: outcome.reply });
            else if (outcome.kind === 'bounced') bounces.push({ emailId, reply: outcome.reply });
            else if (outcome.kind === 'rejected') failures.push({ emailId, contactId: item.contactId, error: outcome.reply });
            // One recipient refused for now (a 4xx, e.g. greylisting) or one message the session
            // dropped: that email goes on through the delivery engine and its retry workflow; the
            // rest of the campaign does not wait.
            else if (outcome.kind === 'transient' && outcome.reply !== null) deferred.push({ emailId, error: outcome.reply });
            // The relay cannot be reached, or the failure is this worker's own: nobody's mail can go,
            // the batch is retried with backoff.
            else return void stop('error', outcome.error);
            completed[i] = true;
            // The SDK throttles what reaches the server; this spares it a call per email.
            if (Date.now() - lastBeat > 500) {
              lastBeat = Date.now();
              ctx.heartbeat(i);
            }
          }
        };
        await Promise.all(Array.from({ length: Math.max(1, input.concurrency) }, lane));
        await loading?.catch(() => undefined);

        // Whatever happened, what the relay accepted is recorded before this attempt ends.
        await marks.drain();
        await markCampaignEmailsFailed(em, input.campaignId, failures);
        await markCampaignEmailsBounced(em, bounces);
        await deferCampaignEmails(em, ctx.info.taskQueue, deferred);
        await releaseSendSlots(em, campaign.projectId, pacer.reserved - pacer.used, defaultRate);

        if (halt?.reason === 'error') {
          if (ctx.cancellationSignal.aborted) await ctx.cancelled;
          throw halt.error;
        }
        let prefix = 0;
        while (prefix < items.length && completed[prefix]) prefix++;
        const cursor = prefix > 0 ? items[prefix - 1]!.contactId : input.after;
        const counts = { sent: marks.written, skipped, failed: failures.length, bounced: bounces.length };
        if (halt?.reason === 'stopped') {
          // Stopped because the project was disabled mid-batch (not cancelled): record why.
          await cancelCampaignIfProjectDisabled(em, input.campaignId);
          return { ...stoppedAt(cursor), ...counts };
        }
        return { cursor, done: endOfCampaign && prefix === items.length, stopped: false, ...counts };
      });
    },
  };
}

export type CampaignActivities = ReturnType<typeof createCampaignActivities>;
