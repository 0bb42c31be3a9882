import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
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
