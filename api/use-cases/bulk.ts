import type { EntityManager } from '@mikro-orm/postgresql';
import { type BulkJobStatus, type BulkOperation, createBulkJob, setBulkJobStatus } from '../../db/contacts/bulk-jobs';
import { startBulkContacts } from '../../temporal/bulk/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

/** POST /contacts/bulk-*: the job row, then its workflow; a start that fails marks the job failed (call-temporal.ts). */
export async function queueBulkJob(
  deps: Pick<AppDeps, 'temporal'>,
  em: EntityManager,
  projectId: string,
  operation: BulkOperation,
  ids: readonly string[],
): Promise<{ jobId: string; status: BulkJobStatus }> {
  const job = await createBulkJob(em, projectId, operation, ids);
  await callTemporal(
    () => startBulkContacts(deps.temporal, projectId, job.jobId),
    (err) => setBulkJobStatus(em, job.jobId, 'failed', `Could not start: ${(err as Error).message}`),
  );
  return job;
}
