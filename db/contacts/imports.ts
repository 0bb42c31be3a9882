import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { AppError, notFound } from '../../errors';
import type { FieldType } from '../entities/contact-field';
import { normalizeEmail } from './contacts';
import { newId } from '../ids';
import { query, queryOne } from '../sql';

export type ImportStatus = 'queued' | 'running' | 'completed' | 'failed';

export interface ImportError {
  row: number;
  email: string;
  reason: string;
}

export interface ImportJobDto {
  jobId: string;
  status: ImportStatus;
  totalRows: number;
  processedRows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: ImportError[];
  /** Set when status is failed: why the file could not be processed. */
  reason?: string;
  createdAt: string;
  updatedAt: string;
}

interface ImportJobRow {
  id: string;
  status: ImportStatus;
  total_rows: number;
  processed_rows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: ImportError[];
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, status, total_rows, processed_rows, imported, updated, skipped, errors, failure_reason, created_at, updated_at';

function toDto(r: ImportJobRow): ImportJobDto {
  return {
    jobId: r.id,
    status: r.status,
    totalRows: r.total_rows,
    processedRows: r.processed_rows,
    imported: r.imported,
    updated: r.updated,
    skipped: r.skipped,
    errors: r.errors,
    ...(r.failure_reason ? { reason: r.failure_reason } : {}),
    createdAt: new Date(r.created_at).toISOString(),
    updatedAt: new Date(r.updated_at).toISOString(),
  };
}

/** 5 MB per CSV upload (docs/design.md, CSV import). */
export const MAX_IMPORT_BYTES = 5 * 1024 * 1024;

export const importTooLarge = () =>
  new AppError(413, 'PAYLOAD_TOO_LARGE', `The CSV file exceeds the limit of ${MAX_IMPORT_BYTES} bytes (5 MB)`, {
    suggestion: 'Split the file into parts of at most 5 MB and import each.',
  });

/**
 * The checks every CSV upload passes before a job is created (API and CLI alike): at most 5 MB,
 * and valid UTF-8 (a BOM is fine), so the worker only sees text it can read.
 */
export function validateImportFile(file: Buffer): void {
  if (file.length > MAX_IMPORT_BYTES) throw importTooLarge();
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(file);
  } catch {
    throw new AppError(422, 'INVALID_ENCODING', 'The CSV file is not valid UTF-8', {
      suggestion: 'Save the file as UTF-8 (for example "CSV UTF-8" in a spreadsheet) and upload it again.',
    });
  }
}

export async function createImportJob(em: EntityManager, projectId: string, file: Buffer): Promise<string> {
  const id = newId('job');
  await query(em, 'insert into import_jobs (id, project_id, file) values (?, ?, ?)', [id, projectId, file]);
  return id;
}

export async function getImportJob(em: EntityManager, projectId: string, jobId: string): Promise<ImportJobDto> {
  const row = await queryOne<ImportJobRow>(em, `select ${COLUMNS} from import_jobs where project_id = ? and id = ?`, [projectId, jobId]);
  if (!row) throw notFound('import job');
  return toDto(row);
}

export interface ImportJobForWorker {
  projectId: string;
  status: ImportStatus;
  file: Buffer | null;
  processedRows: number;
}

/** Marks the job running (unless already final) and returns what the worker needs. */
export async function startImportJob(em: EntityManager, jobId: string): Promise<ImportJobForWorker | undefined> {
  const row = await queryOne<{ project_id: string; status: ImportStatus; file: Buffer | null; processed_rows: number }>(
    em,
    `update import_jobs set status = case when status in ('queued','running') then 'running' else status end, updated_at = now()
     where id = ? returning project_id, status, file, processed_rows`,
    [jobId],
  );
  if (!row) return undefined;
  return { projectId: row.project_id, status: row.status, file: row.file, processedRows: row.processed_rows };
}

export async function setImportTotal(em: EntityManager, jobId: string, totalRows: number): Promise<void> {
  await query(em, 'update import_jobs set total_rows = ?, updated_at = now() where id = ?', [totalRows, jobId]);
}

/** Final states: the stored file is no longer needed. */
export async function finishImportJob(em: EntityManager, jobId: string, outcome: { failed?: string }): Promise<void> {
  await query(
    em,
    `update import_jobs set status = ?, failure_reason = ?, file = null, updated_at = now()
     where id = ? and status in ('queued','running')`,
    [outcome.failed === undefined ? 'completed' : 'failed', outcome.failed ?? null, jobId],
  );
}

export interface ImportRow {
  /** Row number in the file, the header being row 1. */
  row: number;
  email: string;
  data: Record<string, unknown>;
  types: Record<string, FieldType>;
}

const emailSchema = z.email().max(320);

/** Validates a row's email: the normalised email, or the reason it is rejected. */
export function checkEmail(raw: string | undefined): { email: string } | { reason: string } {
  const trimmed = (raw ?? '').trim();
  if (trimmed === '') return { reason: 'missing_email' };
  const email = normalizeEmail(trimmed);
  return emailSchema.safeParse(email).success ? { email } : { reason: 'invalid_email' };
}

/**
 * Applies one chunk in ONE statement: registers new field keys (first type wins), upserts the
 * contacts (rows with the same email collapse, later cells winning, counted once as imported
 * and then as updates), and advances the job's counters and row offset — so a chunk is either
 * applied with its offset or not at all, and a retry resumes exactly after the last one.
 */
export async function applyImportChunk(
  em: EntityManager,
  input: { jobId: string; projectId: string; rows: ImportRow[]; errors: ImportError[]; fromRow: number; processedRows: number },
): Promise<void> {
  const byEmail = new Map<string, { id: string; email: string; data: Record<string, unknown>; n: number }>();
  const fieldTypes = new Map<string, FieldType>();
  for (const r of input.rows) {
    const existing = byEmail.get(r.email);
    if (existing) {
      for (const [k, v] of Object.entries(r.data)) {
        Object.defineProperty(existing.data, k, { value: v, enumerable: true, writable: true, configurable: true });
      }
      existing.n += 1;
    } else {
      byEmail.set(r.email, { id: newId('cnt'), email: r.email, data: { ...r.data }, n: 1 });
    }
    for (const [k, t] of Object.entries(r.types)) if (!fieldTypes.has(k)) fieldTypes.set(k, t);
  }
  const contacts = [...byEmail.values()];
  const fields = [...fieldTypes].map(([k, t]) => ({ k, t }));
  const applied = await query(
    em,
    `with current_job as (
       -- Compare-and-set on the offset: an attempt that lost the job to a retry applies nothing.
       select 1 from import_jobs where id = ? and status = 'running' and processed_rows = ?
     ), input as (
       select * from jsonb_to_recordset(?::jsonb) as r(id text, email text, data jsonb, n integer)
       where exists (select 1 from current_job)
     ), registered as (
       insert into contact_fields (project_id, key, type)
       select ?, f.k, f.t from jsonb_to_recordset(?::jsonb) as f(k text, t text)
       where exists (select 1 from current_job)
       on conflict do nothing
     ), up as (
       insert into contacts as c (id, project_id, email, subscribed, data)
       select i.id, ?, i.email, true, i.data from input i
       on conflict (project_id, email) do update set data = c.data || excluded.data, updated_at = now()
       returning c.email, (xmax = 0) as inserted
     ), counts as (
       select coalesce(sum(case when up.inserted then 1 else 0 end), 0)::int as imported,
              coalesce(sum(i.n - case when up.inserted then 1 else 0 end), 0)::int as updated
       from up join input i on i.email = up.email
     )
     update import_jobs j set
       imported = j.imported + counts.imported,
       updated = j.updated + counts.updated,
       skipped = j.skipped + ?,
       errors = j.errors || ?::jsonb,
       processed_rows = ?,
       updated_at = now()
     from counts where j.id = ? and exists (select 1 from current_job)
     returning j.id`,
    [
      input.jobId,
      input.fromRow,
      JSON.stringify(contacts),
      input.projectId,
      JSON.stringify(fields),
      input.projectId,
      input.errors.length,
      JSON.stringify(input.errors),
      input.processedRows,
      input.jobId,
    ],
  );
  if (applied.length === 0) {
    throw new Error(`Import job ${input.jobId} is no longer at row offset ${input.fromRow}: another attempt took it over`);
  }
}
