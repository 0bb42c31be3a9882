import type { Orm } from '../../db/orm';
import type { DnsLookup } from '../../mail/dns';
import type { Mailer } from '../../mail/transport';
import { createContactFieldActivities } from './contact-fields';
import { createDomainActivities } from './domains';
import { createSendActivities } from './send';

export interface ActivityDeps {
  orm: Orm;
  dns: DnsLookup;
  mailer: Mailer;
}

/** Activities are built from their dependencies, so tests and the worker wire them the same way. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createContactFieldActivities(deps),
    ...createDomainActivities(deps),
    ...createSendActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
