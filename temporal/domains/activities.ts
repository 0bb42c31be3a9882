import { type DomainDto, loadDomainKeys, recordDomainCheck } from '../../db/domains/domains';
import type { Orm } from '../../db/orm';
import { checkDomainRecords } from '../../mail/domain-check';
import type { DnsLookup } from '../../mail/dns';
import type { Config } from '../../config';

/** `domain` is undefined once the domain was deleted: the verification workflow then ends. */
export interface DomainCheckOutcome {
  domain: DomainDto | undefined;
}

export function createDomainActivities({ orm, dns, config }: { orm: Orm; dns: DnsLookup; config: Pick<Config, 'returnPath'> }) {
  return {
    async checkDomain(domainId: string): Promise<DomainCheckOutcome> {
      const em = orm.em.fork();
      const keys = await loadDomainKeys(em, domainId);
      if (!keys) return { domain: undefined };
      const check = await checkDomainRecords(dns, keys.domain, keys.selector, keys.publicKeyBase64, config.returnPath);
      return { domain: await recordDomainCheck(em, domainId, check) };
    },
  };
}

export type DomainActivities = ReturnType<typeof createDomainActivities>;
