import type { EntityManager } from '@mikro-orm/postgresql';
import { addDomain, deleteDomain, type DomainDto, getDomain } from '../../db/domains/domains';
import { notFound } from '../../errors';
import { generateDkimKeyPair } from '../../mail/dkim';
import { checkDomainNow, startDomainVerification, stopDomainVerification } from '../../temporal/domains/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

type Deps = Pick<AppDeps, 'temporal'>;

/**
 * POST /domains: the domain with a new DKIM key pair, then its verification workflow, which must
 * find the row at once: a start that fails removes the domain again (call-temporal.ts).
 */
export async function registerDomain(deps: Deps, em: EntityManager, projectId: string, name: string): Promise<DomainDto> {
  const domain = await addDomain(em, projectId, name, await generateDkimKeyPair());
  await callTemporal(
    () => startDomainVerification(deps.temporal, projectId, domain.id),
    () => deleteDomain(em, projectId, domain.id),
  );
  return domain;
}

/** GET /domains/:id/verify: the check runs in the domain's workflow (revived if it ended). */
export async function checkDomain(deps: Deps, em: EntityManager, projectId: string, id: string): Promise<DomainDto> {
  await getDomain(em, projectId, id);
  const { domain } = await callTemporal(() => checkDomainNow(deps.temporal, projectId, id));
  if (!domain) throw notFound('domain');
  return domain;
}

/** DELETE /domains/:id: the row goes, and its workflow is stopped before the commit; a check that finds it gone ends it too. */
export function removeDomain(deps: Deps, em: EntityManager, projectId: string, id: string): Promise<void> {
  return em.transactional(async (tx) => {
    await deleteDomain(tx, projectId, id);
    await callTemporal(() => stopDomainVerification(deps.temporal, id));
  });
}
