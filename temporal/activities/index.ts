import type { Config } from '../../config';
import type { Orm } from '../../db/orm';
import type { OutboxListener } from '../../db/outbox-listener';
import type { DnsLookup } from '../../mail/dns';
import type { Mailer } from '../../mail/transport';
import { createBulkActivities } from './bulk';
import { createCampaignActivities } from './campaigns';
import { createConditionActivities } from './conditions';
import { createContactFieldActivities } from './contact-fields';
import { createDeliveryEngineActivities } from './delivery-engine';
import { createDomainActivities } from './domains';
import { createImportActivities } from './imports';
import { createJourneyActivities } from './journeys';
import { createSegmentActivities } from './segments';
import { createSendActivities } from './send';
import { createSystemEmailActivities } from './system-email';
import { createTriggerDispatcherActivities } from './trigger-dispatcher';
import { createWebhookActivities } from './webhooks';

export interface ActivityDeps {
  orm: Orm;
  dns: DnsLookup;
  mailer: Mailer;
  config: Config;
  /** The worker's LISTEN connection: wakes the engines when a writer queues work. */
  listener: OutboxListener;
}

/** Activities are built from their dependencies, so tests and the worker wire them the same way. */
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

export type Activities = ReturnType<typeof createActivities>;
