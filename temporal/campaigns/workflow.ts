import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  ContinueAsNew,
  continueAsNew,
  defineSignal,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { CampaignActivities } from './activities';

/** A SCHEDULED campaign moved to another time (PUT /campaigns/:id); also sent by the start itself. */
export const campaignScheduleSignal = defineSignal<[{ scheduledFor: string | null }]>('campaignSchedule');

export interface CampaignTuning {
  /** Recipients per activity (one keyset page). */
  batchSize: number;
  /** Emails in flight at once within a batch. */
  concurrency: number;
  /** A batch starts no new recipient after this long (a slow throttle keeps activities short). */
  maxBatchSeconds: number;
  /** Continue-as-new after this many batches even if Temporal does not suggest it yet. */
  batchesPerRun: number;
}

/**
 * The batch size is the deployment's (CAMPAIGN_BATCH_SIZE, config.ts). 32 in flight over the pool's
 * 10 connections: while some wait on the relay, others are rendered and signed, and the SENT marks
 * cover more emails a statement (3–11 % more emails/s than 16 in five alternating pairs of
 * bench/campaign.ts); the relay still sees 10 connections.
 */
export const DEFAULT_CAMPAIGN_TUNING: Omit<CampaignTuning, 'batchSize'> = { concurrency: 32, maxBatchSeconds: 60, batchesPerRun: 1000 };

export interface CampaignInput {
  projectId: string;
  campaignId: string;
  /** ISO 8601; null: send now. */
  scheduledFor: string | null;
  tuning: CampaignTuning;
  /** Longest wait between retries of a failing activity (relay down, domain unverified). */
  maxRetryIntervalSeconds: number;
  /** Set by continue-as-new: the audience is frozen and sending resumes after `cursor`. */
  resume?: { cursor: string | null; run: number };
}

export type CampaignResult = 'SENT' | 'CANCELLED' | 'DRAFT' | 'GONE';

/**
 * One campaign, from its scheduled time to SENT or CANCELLED. It sleeps until `scheduledFor`
 * (a signal moves the time; cancellation ends the wait), begins the send (SCHEDULED → SENDING and
 * the audience snapshot, one idempotent activity), then sends batch after batch through a keyset
 * cursor, each batch an activity of hundreds of emails, and continues as new before the history
 * grows large. Cancellation (POST /campaigns/:id/cancel) stops the running batch — the workflow
 * waits until it has stopped — and records CANCELLED.
 */
export async function campaign(input: CampaignInput): Promise<CampaignResult> {
  const retry = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: `${input.maxRetryIntervalSeconds} seconds` };
  const control = proxyActivities<CampaignActivities>({ startToCloseTimeout: '10 minutes', retry });
  const sending = proxyActivities<CampaignActivities>({
    // A batch is bounded by maxBatchSeconds; the heartbeat notices a dead worker much sooner.
    startToCloseTimeout: `${input.tuning.maxBatchSeconds + 600} seconds`,
    heartbeatTimeout: '10 seconds',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
  });
  const { campaignId } = input;

  let scheduledFor = input.scheduledFor;
  setHandler(campaignScheduleSignal, (s) => void (scheduledFor = s.scheduledFor));

  try {
    if (!input.resume) {
      for (;;) {
        while (scheduledFor !== null && Date.parse(scheduledFor) > Date.now()) {
          const target = scheduledFor;
          await condition(() => scheduledFor !== target, Date.parse(target) - Date.now());
        }
        const begun = await control.beginCampaignSend({ campaignId });
        if (begun.state === 'NOT_YET') {
          scheduledFor = begun.scheduledFor;
          continue;
        }
        // DRAFT: the request that started this rolled back; SENT / CANCELLED / GONE: nothing to do.
        if (begun.state !== 'SENDING') return begun.state;
        break;
      }
    }

    let cursor = input.resume?.cursor ?? null;
    for (let batches = 1; ; batches++) {
      const r = await sending.sendCampaignBatch({
        campaignId,
        after: cursor,
        batchSize: input.tuning.batchSize,
        concurrency: input.tuning.concurrency,
        maxBatchSeconds: input.tuning.maxBatchSeconds,
      });
      cursor = r.cursor;
      if (r.stopped) return (await control.finishCampaign({ campaignId, outcome: 'CANCELLED' })) === 'GONE' ? 'GONE' : 'CANCELLED';
      if (r.done) break;
      if (batches >= input.tuning.batchesPerRun || workflowInfo().continueAsNewSuggested) {
        await continueAsNew<typeof campaign>({ ...input, resume: { cursor, run: (input.resume?.run ?? 0) + 1 } });
      }
    }
    const status = await control.finishCampaign({ campaignId, outcome: 'SENT' });
    return status === 'SENT' ? 'SENT' : status === 'GONE' ? 'GONE' : 'CANCELLED';
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    // The final status is written even though the workflow is being cancelled. A failure that
    // retries could not fix (a segment deleted under a scheduled campaign) ends it CANCELLED too,
    // with the reason kept on the row: SENT and CANCELLED are the only final states.
    const cancelled = isCancellation(err);
    await CancellationScope.nonCancellable(() =>
      control.finishCampaign({ campaignId, outcome: 'CANCELLED', ...(cancelled ? {} : { error: err instanceof Error ? err.message : String(err) }) }),
    );
    throw err;
  }
}
