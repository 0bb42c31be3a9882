import { proxyActivities } from '@temporalio/workflow';
import type { BulkActivities } from './activities';

const { bulkJobStart, bulkJobChunk, bulkJobFinish } = proxyActivities<BulkActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { maximumAttempts: 10 },
});

export interface BulkContactsInput {
  jobId: string;
  chunkSize?: number;
}

/**
 * Works one bulk contact job (db/contacts/bulk-jobs.ts), a chunk of ids per activity. The job row keeps the
 * offset of the first id not done, moved with each chunk's work: a retry or a rerun resumes there.
 * At most 1,000 ids: a handful of activities, no continue-as-new needed.
 */
export async function bulkContacts(input: BulkContactsInput): Promise<void> {
  const size = input.chunkSize ?? 200;
  const plan = await bulkJobStart(input.jobId);
  if (!plan || plan.status === 'completed' || plan.status === 'failed') return;
  try {
    let offset = plan.nextOffset;
    while (offset < plan.total) {
      const next = await bulkJobChunk(input.jobId, plan.operation, offset, size);
      // A chunk reported done by an earlier attempt: continue from where the row says.
      offset = next > offset ? next : offset + size;
    }
    await bulkJobFinish(input.jobId, 'completed');
  } catch (err) {
    await bulkJobFinish(input.jobId, 'failed', (err as Error).message);
    throw err;
  }
}
