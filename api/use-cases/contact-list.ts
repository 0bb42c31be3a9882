import type { EntityManager } from '@mikro-orm/postgresql';
import { type ContactDto, listContacts } from '../../db/contacts/contacts';
import type { Condition } from '../../db/conditions/grammar';
import type { CursorPage } from '../../db/paging';
import { checkReferences, memberPredicate } from '../../db/segments/segments';

/**
 * GET /contacts: with a condition, the contacts a DYNAMIC segment with that condition would hold
 * (the same checks and the same compiled predicate), paged and filtered like the whole list.
 */
export async function listContactsMatching(
  em: EntityManager,
  projectId: string,
  query: { limit: number; cursor?: string; search?: string; subscribed?: boolean; condition?: Condition },
): Promise<CursorPage<ContactDto>> {
  const { condition, ...rest } = query;
  if (!condition) return listContacts(em, projectId, rest);
  await checkReferences(em, projectId, condition);
  return listContacts(em, projectId, { ...rest, matching: await memberPredicate(em, projectId, { condition }) });
}
