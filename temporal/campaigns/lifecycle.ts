import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { CampaignIdKey, ProjectIdKey } from '../search-attributes';
import { type campaign, campaignScheduleSignal, type CampaignTuning, DEFAULT_CAMPAIGN_TUNING } from './workflow';

/**
 * Starts the campaign's workflow, or (already running: a SCHEDULED campaign whose time moved)
 * tells it the new time. Called inside the transaction that changes the campaign's row.
 */
export async function startCampaign(
  temporal: TemporalGateway,
  input: { projectId: string; campaignId: string; scheduledFor: string | null },
  tuning: Partial<CampaignTuning> = {},
): Promise<void> {
  await temporal.client.workflow.signalWithStart<typeof campaign, [{ scheduledFor: string | null }]>('campaign', {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.campaign(input.campaignId),
    args: [
      {
        ...input,
        tuning: { ...DEFAULT_CAMPAIGN_TUNING, batchSize: temporal.config.campaignBatchSize, ...tuning },
        maxRetryIntervalSeconds: temporal.config.sendRetryMaxIntervalSeconds,
      },
    ],
    signal: campaignScheduleSignal,
    signalArgs: [{ scheduledFor: input.scheduledFor }],
    staticSummary: `campaign ${input.campaignId}`,
    typedSearchAttributes: [
      { key: ProjectIdKey, value: input.projectId },
      { key: CampaignIdKey, value: input.campaignId },
    ],
  });
}

/** Requests cancellation; the workflow stops its batch and records CANCELLED itself. */
export async function cancelCampaign(temporal: TemporalGateway, campaignId: string): Promise<void> {
  try {
    await temporal.client.workflow.getHandle(workflowIds.campaign(campaignId)).cancel();
  } catch (err) {
    if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
  }
}
