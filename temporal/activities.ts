import type { Config } from '../config';
import type { Orm } from '../db/orm';
import type { EngineWakeups, OutboxListener } from './wakeups';
import type { DnsLookup } from '../mail/dns';
import type { Mailer } from '../mail/transport';
import { createBulkActivities } from './bulk/activities';
import { createCampaignActivities } from './campaigns/activities';
import { createConditionActivities } from './journeys/condition-activities';
import { createContactFieldActivities } from './contact-fields/activities';
import { createDeliveryEngineActivities } from './delivery/activities';
import { createDomainActivities } from './domains/activities';
import { createImportActivities } from './imports/activities';
import { createJourneyActivities } from './journeys/activities';
import { createSegmentActivities } from './segments/activities';
import { createSendActivities } from './delivery/send-emails-activities';
import { createSystemEmailActivities } from './system-email/activities';
import { createTriggerDispatcherActivities } from './triggers/activities';
import { createWebhookActivities } from './journeys/webhooks';

export interface ActivityDeps {
  orm: Orm;
  dns: DnsLookup;
  mailer: Mailer;
  config: Config;
  /** The worker's LISTEN connection, on which its engines wait for work. */
  listener: OutboxListener;
  /** Wakes the engines after an activity's commit queued work for them. */
  wakeups: EngineWakeups;
}

/**
 * Activities are built from their dependencies, so tests and the worker wire them the same way.
 * The worker registers them all; each workflow proxies only its own feature's (typed from the
 * factory beside it, test/architecture.test.ts), so the names here must stay unique.
 */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createContactFieldActivities(deps),
    ...createImportActivities(deps),
    ...createDomainActivities(deps),
    ...createSendActivities(deps),
    ...createDeliveryEngineActivities(deps),
    ...createTriggerDispatcherActivities(deps),
    ...createJourneyActivities(deps),
    ...createConditionActivities(deps),
    ...createWebhookActivities(deps),
    ...createSegmentActivities(deps),
    ...createCampaignActivities(deps),
    ...createBulkActivities(deps),
    ...createSystemEmailActivities(deps),
  };
}
