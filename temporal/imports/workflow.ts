import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { ImportActivities } from './activities';

const { processContactImport } = proxyActivities<ImportActivities>({
  startToCloseTimeout: '30 minutes',
  // A crashed worker is noticed within a heartbeat timeout; the retry resumes at the committed offset.
  heartbeatTimeout: '15 seconds',
  retry: { maximumAttempts: 20, maximumInterval: '30 seconds' },
});

const { failContactImport } = proxyActivities<ImportActivities>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 10 },
});

export interface ContactImportInput {
  jobId: string;
  chunkSize?: number;
}

/** One per import job: the file stays in Postgres; only the job id travels through Temporal. */
export async function contactImport(input: ContactImportInput): Promise<void> {
  try {
    await processContactImport(input.jobId, input.chunkSize);
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    await failContactImport(input.jobId, `The import stopped after repeated errors: ${err.cause?.message ?? err.message}`);
  }
}
