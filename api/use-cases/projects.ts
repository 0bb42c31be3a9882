import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteProject } from '../../db/accounts/user-projects';
import { type ProjectRunner, resetProject, type ResetSummary } from '../../db/projects/reset';
import { cancelCampaign } from '../../temporal/campaigns/lifecycle';
import type { TemporalGateway } from '../../temporal/client';
import { stopDomainVerification } from '../../temporal/domains/lifecycle';
import { cancelJourney } from '../../temporal/journeys/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

/**
 * A project's running work, stopped through its workflows' lifecycles; a call Temporal cannot take
 * fails the request as call-temporal.ts says. The journeys and campaigns are stopped before
 * anything is deleted, so the request can be repeated; a domain's workflow, stopped after the
 * delete, also ends on its own when it finds its domain gone.
 */
const runner = (temporal: TemporalGateway): ProjectRunner & { stopDomainVerification(domainId: string): Promise<void> } => ({
  cancelJourney: (executionId) => callTemporal(() => cancelJourney(temporal, executionId)),
  cancelCampaign: (campaignId) => callTemporal(() => cancelCampaign(temporal, campaignId)),
  stopDomainVerification: (domainId) => callTemporal(() => stopDomainVerification(temporal, domainId)),
});

/** DELETE /users/@me/projects/:id: its journeys and campaigns stopped, its images removed, then the project and its domains' workflows. */
export function removeProject(deps: Pick<AppDeps, 'temporal' | 'storage'>, em: EntityManager, projectId: string): Promise<void> {
  return deleteProject(em, projectId, runner(deps.temporal), deps.storage);
}

/** POST /users/@me/projects/:id/reset: its journeys and campaigns stopped, then its data deleted. */
export function resetProjectData(deps: Pick<AppDeps, 'temporal'>, em: EntityManager, projectId: string, confirm: string): Promise<ResetSummary> {
  return resetProject(em, projectId, confirm, runner(deps.temporal));
}
