import { continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { fieldSlotsWantedSignal } from '../signals';
import type { ContactFieldActivities } from './activities';

const { removeContactFieldBatch, unregisterContactField } = proxyActivities<ContactFieldActivities>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 10 },
});

export interface DeleteContactFieldInput {
  projectId: string;
  key: string;
  batchSize?: number;
  /** Carried across continue-as-new. */
  removedSoFar?: number;
}

/**
 * Removes a custom field from every contact of a project, one bounded batch per activity,
 * so no statement locks more than a batch of rows and a crash resumes where it stopped.
 */
export async function deleteContactField(input: DeleteContactFieldInput): Promise<{ removed: number }> {
  const batchSize = input.batchSize ?? 1000;
  let removed = input.removedSoFar ?? 0;
  // The key leaves the registry first: the field disappears from listings at once.
  await unregisterContactField(input.projectId, input.key);
  for (;;) {
    const n = await removeContactFieldBatch(input.projectId, input.key, batchSize);
    removed += n;
    if (n < batchSize) return { removed };
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof deleteContactField>({ ...input, batchSize, removedSoFar: removed });
    }
  }
}

/**
 * Gives the fields a project's segments name their typed slot columns (db/conditions/field-slots.ts),
 * one at a time per project. Segment writes signal it (signal-with-start): a condition saved while
 * a back-fill runs is taken by another round, not lost.
 */
export async function prepareFieldSlots(input: { projectId: string }): Promise<{ prepared: string[] }> {
  const { prepareFieldSlots: prepare } = proxyActivities<ContactFieldActivities>({
    startToCloseTimeout: '1 hour',
    heartbeatTimeout: '1 minute',
    retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes' },
  });
  let wanted = true;
  setHandler(fieldSlotsWantedSignal, () => {
    wanted = true;
  });
  const prepared: string[] = [];
  while (wanted) {
    wanted = false;
    prepared.push(...(await prepare(input.projectId)));
  }
  return { prepared };
}
