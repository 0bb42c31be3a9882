import type { EntityManager } from '@mikro-orm/postgresql';
import { createImportJob, finishImportJob } from '../../db/contacts/imports';
import { startContactImport } from '../../temporal/imports/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

/**
 * POST /contacts/import and `tidings contacts import`: stores the (already checked) CSV file in its
 * job row, then starts the job's workflow; a start that fails marks the job failed (call-temporal.ts).
 */
export async function queueContactImport(deps: Pick<AppDeps, 'temporal'>, em: EntityManager, projectId: string, file: Buffer): Promise<string> {
  const jobId = await createImportJob(em, projectId, file);
  await callTemporal(
    () => startContactImport(deps.temporal, projectId, jobId),
    (err) => finishImportJob(em, jobId, { failed: `Could not start: ${(err as Error).message}` }),
  );
  return jobId;
}
