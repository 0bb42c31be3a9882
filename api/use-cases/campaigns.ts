import type { EntityManager } from '@mikro-orm/postgresql';
import {
  type CampaignDto,
  type CampaignInput,
  checkSegment,
  createCampaign,
  markCampaignCancelled,
  markCampaignForSending,
  queueTestEmail,
  replaceCampaign,
} from '../../db/campaigns/campaigns';
import { requireVerifiedSender } from '../../db/domains/domains';
import { cancelCampaign as cancelCampaignWorkflow, startCampaign } from '../../temporal/campaigns/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

type Deps = Pick<AppDeps, 'temporal' | 'config'>;

// Every change that involves the campaign's workflow (send, reschedule, cancel) writes the row and
// calls Temporal in one transaction, Temporal last: if Temporal refuses, the row rolls back and the
// client can retry; the workflow's own first step waits on the row lock (call-temporal.ts).

/** POST /campaigns: a DRAFT, from a verified sender to an existing segment (or everyone). */
export async function draftCampaign(deps: Deps, em: EntityManager, projectId: string, input: CampaignInput): Promise<CampaignDto> {
  await requireVerifiedSender(em, projectId, input.from, deps.config);
  await checkSegment(em, projectId, input.segmentId);
  return createCampaign(em, projectId, input);
}

/** PUT /campaigns/:id: the same checks; a SCHEDULED campaign whose time moved tells its workflow. */
export async function editCampaign(
  deps: Deps,
  em: EntityManager,
  projectId: string,
  id: string,
  input: CampaignInput & { scheduledFor?: string | null },
): Promise<CampaignDto> {
  await requireVerifiedSender(em, projectId, input.from, deps.config);
  await checkSegment(em, projectId, input.segmentId);
  return em.transactional(async (tx) => {
    const { campaign, rescheduledTo } = await replaceCampaign(tx, projectId, id, input);
    if (rescheduledTo) await callTemporal(() => startCampaign(deps.temporal, { projectId, campaignId: campaign.id, scheduledFor: rescheduledTo }));
    return campaign;
  });
}

/** POST /campaigns/:id/send: DRAFT → SENDING or SCHEDULED, and its workflow. */
export function sendCampaign(deps: Deps, em: EntityManager, projectId: string, id: string, scheduledFor: string | undefined): Promise<CampaignDto> {
  return em.transactional(async (tx) => {
    const campaign = await markCampaignForSending(tx, projectId, id, scheduledFor);
    await requireVerifiedSender(tx, projectId, campaign.from, deps.config);
    await callTemporal(() => startCampaign(deps.temporal, { projectId, campaignId: campaign.id, scheduledFor: campaign.scheduledFor }));
    return campaign;
  });
}

/** POST /campaigns/:id/cancel: → CANCELLED, and its workflow stops. */
export function cancelCampaign(deps: Deps, em: EntityManager, projectId: string, id: string): Promise<CampaignDto> {
  return em.transactional(async (tx) => {
    const campaign = await markCampaignCancelled(tx, projectId, id);
    await callTemporal(() => cancelCampaignWorkflow(deps.temporal, campaign.id));
    return campaign;
  });
}

/** POST /campaigns/:id/test: the copy is written QUEUED, and the delivery engine woken once it is committed. */
export async function sendCampaignTest(
  deps: Pick<AppDeps, 'config' | 'linkSecret' | 'wakeups'>,
  em: EntityManager,
  projectId: string,
  campaignId: string,
  email: string,
): Promise<{ emailId: string; email: string; status: 'QUEUED' }> {
  const queue = deps.config.temporal.taskQueue;
  const emailId = await em.transactional((tx) =>
    queueTestEmail(tx, projectId, campaignId, email, { publicUrl: deps.config.publicUrl, linkSecret: deps.linkSecret, senders: deps.config, queue }),
  );
  deps.wakeups.emails(queue);
  return { emailId, email: email.toLowerCase(), status: 'QUEUED' };
}
