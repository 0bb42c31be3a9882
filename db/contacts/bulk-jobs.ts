import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { newId } from '../ids';
import { query, queryOne, transaction } from '../sql';
import { recordEvents, subscriptionEventName } from '../record-events';

export const BULK_OPERATIONS = ['subscribe', 'unsubscribe', 'delete'] as const;
export type BulkOperation = (typeof BULK_OPERATIONS)[number];
export const BULK_JOB_STATUSES = ['queued', 'running', 'completed', 'failed'] as const;
export type BulkJobStatus = (typeof BULK_JOB_STATUSES)[number];
export const MAX_BULK_IDS = 1000;

export interface BulkJobError {
  contactId: string;
  reason: string;
}

export interface BulkJobDto {
  jobId: string;
  operation: BulkOperation;
  status: BulkJobStatus;
  total: number;
  processed: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: BulkJobError[];
}

interface BulkJobRow {
  id: string;
  project_id: string;
  operation: BulkOperation;
  status: BulkJobStatus;
  ids: string[];
  total: number;
  next_offset: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: BulkJobError[];
}

const toDto = (r: BulkJobRow): BulkJobDto => ({
  jobId: r.id,
  operation: r.operation,
  status: r.status,
  total: r.total,
  processed: r.next_offset,
  succeeded: r.succeeded,
  unchanged: r.unchanged,
  failed: r.failed,
  errors: r.errors,
});

/** The ids once each, in their first order: a repeated id is one contact, counted once. */
export async function createBulkJob(
  em: EntityManager,
  projectId: string,
  operation: BulkOperation,
  ids: readonly string[],
): Promise<{ jobId: string; status: BulkJobStatus }> {
  const unique = [...new Set(ids)];
  const row = await queryOne<{ id: string; status: BulkJobStatus }>(
    em,
    `insert into bulk_jobs (id, project_id, operation, ids, total) values (?, ?, ?, ?::jsonb, ?) returning id, status`,
    [newId('job'), projectId, operation, JSON.stringify(unique), unique.length],
  );
  return { jobId: row!.id, status: row!.status };
}

export async function getBulkJob(em: EntityManager, projectId: string, jobId: string): Promise<BulkJobDto> {
  const row = await queryOne<BulkJobRow>(em, 'select * from bulk_jobs where project_id = ? and id = ?', [projectId, jobId]);
  if (!row) throw notFound('bulk job');
  return toDto(row);
}

/** What the workflow needs to plan its chunks. */
export async function bulkJobPlan(
  em: EntityManager,
  jobId: string,
): Promise<{ projectId: string; operation: BulkOperation; total: number; nextOffset: number; status: BulkJobStatus } | null> {
  const row = await queryOne<BulkJobRow>(em, 'select * from bulk_jobs where id = ?', [jobId]);
  if (!row) return null;
  return { projectId: row.project_id, operation: row.operation, total: row.total, nextOffset: row.next_offset, status: row.status };
}

/** queued → running, running → completed, any unfinished → failed; a finished job stays as it is. */
export async function setBulkJobStatus(em: EntityManager, jobId: string, status: Exclude<BulkJobStatus, 'queued'>, error?: string): Promise<void> {
  const finished = status !== 'running';
  await query(
    em,
    `update bulk_jobs set status = ?, error = coalesce(?, error), updated_at = now(),
       finished_at = case when ? then now() else finished_at end
     where id = ? and status in ('queued','running')`,
    [status, error ?? null, finished, jobId],
  );
}

export interface ChunkOutcome {
  /** The offset of the first id not yet done, after this chunk. */
  nextOffset: number;
  /** False when the chunk had already been done (a retried activity). */
  applied: boolean;
}

/**
 * Locks the job and reads the chunk that starts at `offset`; null when that chunk is done already
 * (its work and the moved offset committed together), so a retry does nothing twice.
 */
async function lockChunk(tx: EntityManager, jobId: string, offset: number, size: number) {
  const row = await queryOne<BulkJobRow>(tx, 'select * from bulk_jobs where id = ? for update', [jobId]);
  if (!row || row.next_offset !== offset) return { row, ids: null };
  return { row, ids: row.ids.slice(offset, offset + size) };
}

async function advance(
  tx: EntityManager,
  jobId: string,
  nextOffset: number,
  counts: { succeeded: number; unchanged: number; errors: BulkJobError[] },
): Promise<void> {
  await query(
    tx,
    `update bulk_jobs set next_offset = ?, succeeded = succeeded + ?, unchanged = unchanged + ?, failed = failed + ?,
       errors = errors || ?::jsonb, updated_at = now()
     where id = ?`,
    [nextOffset, counts.succeeded, counts.unchanged, counts.errors.length, JSON.stringify(counts.errors), jobId],
  );
}

/**
 * Sets `subscribed` on the chunk's contacts of the job's project, set-based: the changed ones
 * succeed and get a contact.subscribed / contact.unsubscribed event each, existing ones already in
 * that state are unchanged, other ids (unknown, or another project's) fail as not_found.
 */
export async function applySubscriptionChunk(em: EntityManager, jobId: string, offset: number, size: number): Promise<ChunkOutcome> {
  return transaction(em, async (tx) => {
    const { row, ids } = await lockChunk(tx, jobId, offset, size);
    if (!row || !ids) return { nextOffset: row?.next_offset ?? offset, applied: false };
    const subscribed = row.operation === 'subscribe';
    const changed = await query<{ id: string }>(
      tx,
      `update contacts set subscribed = ?, updated_at = now()
       where project_id = ? and id = any(?) and subscribed <> ? returning id`,
      [subscribed, row.project_id, ids, subscribed],
    );
    const existing = await query<{ id: string }>(tx, 'select id from contacts where project_id = ? and id = any(?)', [
      row.project_id,
      ids,
    ]);
    const name = subscriptionEventName(subscribed);
    await recordEvents(tx, changed.map((c) => ({ projectId: row.project_id, contactId: c.id, name })));
    const found = new Set(existing.map((r) => r.id));
    const errors = ids.filter((id) => !found.has(id)).map((contactId) => ({ contactId, reason: 'not_found' }));
    const nextOffset = offset + ids.length;
    await advance(tx, jobId, nextOffset, { succeeded: changed.length, unchanged: found.size - changed.length, errors });
    return { nextOffset, applied: true };
  });
}

/** The chunk's contacts (of the job's project) that have a RUNNING or WAITING execution. */
export async function activeExecutionsOfChunk(em: EntityManager, jobId: string, offset: number, size: number): Promise<string[]> {
  const row = await queryOne<BulkJobRow>(em, 'select * from bulk_jobs where id = ?', [jobId]);
  if (!row || row.next_offset !== offset) return [];
  const rows = await query<{ id: string }>(
    em,
    `select id from workflow_executions where project_id = ? and contact_id = any(?) and status in ('RUNNING','WAITING')`,
    [row.project_id, row.ids.slice(offset, offset + size)],
  );
  return rows.map((r) => r.id);
}

/**
 * Deletes the chunk's contacts of the job's project; memberships, events and execution rows go by
 * cascade. Returns, besides the outcome, the executions that became active since they were
 * cancelled (the caller stops them in Temporal too).
 */
export async function deleteContactsChunk(
  em: EntityManager,
  jobId: string,
  offset: number,
  size: number,
): Promise<ChunkOutcome & { lateExecutionIds: string[] }> {
  return transaction(em, async (tx) => {
    const { row, ids } = await lockChunk(tx, jobId, offset, size);
    if (!row || !ids) return { nextOffset: row?.next_offset ?? offset, applied: false, lateExecutionIds: [] };
    const late = await query<{ id: string }>(
      tx,
      `select id from workflow_executions where project_id = ? and contact_id = any(?) and status in ('RUNNING','WAITING')`,
      [row.project_id, ids],
    );
    const deleted = await query<{ id: string }>(tx, 'delete from contacts where project_id = ? and id = any(?) returning id', [
      row.project_id,
      ids,
    ]);
    const gone = new Set(deleted.map((r) => r.id));
    const errors = ids.filter((id) => !gone.has(id)).map((contactId) => ({ contactId, reason: 'not_found' }));
    const nextOffset = offset + ids.length;
    await advance(tx, jobId, nextOffset, { succeeded: gone.size, unchanged: 0, errors });
    return { nextOffset, applied: true, lateExecutionIds: late.map((r) => r.id) };
  });
}
