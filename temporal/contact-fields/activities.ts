import type { Orm } from '../../db/orm';
import { removeFieldBatch, unregisterField } from '../../db/contacts/fields';

export function createContactFieldActivities({ orm }: { orm: Orm }) {
  return {
    async removeContactFieldBatch(projectId: string, key: string, batchSize: number): Promise<number> {
      return removeFieldBatch(orm.em.fork(), projectId, key, batchSize);
    },
    async unregisterContactField(projectId: string, key: string): Promise<void> {
      await unregisterField(orm.em.fork(), projectId, key);
    },
  };
}

export type ContactFieldActivities = ReturnType<typeof createContactFieldActivities>;
