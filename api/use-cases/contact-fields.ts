import type { EntityManager } from '@mikro-orm/postgresql';
import { requireCustomField } from '../../db/contacts/fields';
import { deleteContactField } from '../../temporal/contact-fields/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

/** DELETE /contacts/fields/:field: a custom field only, removed from every contact by its workflow, which the request waits for. */
export async function deleteCustomField(
  deps: Pick<AppDeps, 'temporal'>,
  em: EntityManager,
  projectId: string,
  field: string,
): Promise<{ field: string; removed: number }> {
  const key = await requireCustomField(em, projectId, field);
  const { removed } = await callTemporal(() => deleteContactField(deps.temporal, projectId, key));
  return { field: `data.${key}`, removed };
}
