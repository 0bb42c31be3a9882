import { Context } from '@temporalio/activity';
import type { Orm } from '../../db/orm';
import { prepareFieldSlots } from '../../db/conditions/field-slots';
import { removeFieldBatch, unregisterField } from '../../db/contacts/fields';

export function createContactFieldActivities({ orm }: { orm: Orm }) {
  return {
    async removeContactFieldBatch(projectId: string, key: string, batchSize: number): Promise<number> {
      return removeFieldBatch(orm.em.fork(), projectId, key, batchSize);
    },
    async unregisterContactField(projectId: string, key: string): Promise<void> {
      await unregisterField(orm.em.fork(), projectId, key);
    },
    /** Gives the fields the project's segments name their slot columns; heartbeats after every batch of the back-fill. */
    async prepareFieldSlots(projectId: string): Promise<string[]> {
      const { prepared } = await prepareFieldSlots(orm.em.fork(), projectId, { progress: (at) => Context.current().heartbeat(at) });
      return prepared;
    },
  };
}

export type ContactFieldActivities = ReturnType<typeof createContactFieldActivities>;
