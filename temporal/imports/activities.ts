import { Readable } from 'node:stream';
import { Context } from '@temporalio/activity';
import { parse } from 'csv-parse';
import { type CsvColumns, planColumns, recordData } from '../../db/contacts/csv-typing';
import {
  applyImportChunk,
  checkEmail,
  finishImportJob,
  type ImportError,
  type ImportRow,
  setImportTotal,
  startImportJob,
} from '../../db/contacts/imports';
import type { Orm } from '../../db/orm';

export const IMPORT_CHUNK_SIZE = 1000;

const csvOptions = { bom: true, relax_column_count: true, skip_empty_lines: true } as const;

/** Streams the records of a stored CSV file (csv-parse, not a whole-file parse). */
function records(file: Buffer): AsyncIterable<string[]> {
  return Readable.from([file]).pipe(parse(csvOptions));
}

function currentContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

export function createImportActivities({ orm }: { orm: Orm }) {
  return {
    /**
     * Processes one import job from its committed row offset to the end. Each chunk is applied
     * with its offset in one statement, then the offset is heartbeated; a retried attempt reads
     * the committed offset again, so no row is applied twice and none is lost.
     */
    async processContactImport(jobId: string, chunkSizeOrNull?: number | null): Promise<void> {
      const chunkSize = chunkSizeOrNull || IMPORT_CHUNK_SIZE;
      const job = await startImportJob(orm.em.fork(), jobId);
      if (!job || job.status !== 'running' || !job.file) return;
      const ctx = currentContext();
      const file = job.file;
      let offset = job.processedRows;
      ctx?.heartbeat(offset);

      let columns: CsvColumns | undefined;
      let total = 0;
      try {
        // First pass: the header and the number of data rows (cheap: at most 5 MB).
        for await (const record of records(file)) {
          if (!columns) {
            const planned = planColumns(record);
            if ('error' in planned) {
              await finishImportJob(orm.em.fork(), jobId, { failed: planned.error });
              return;
            }
            columns = planned;
          } else total += 1;
        }
      } catch (err) {
        await finishImportJob(orm.em.fork(), jobId, { failed: `The file is not valid CSV: ${(err as Error).message}` });
        return;
      }
      if (!columns) {
        await finishImportJob(orm.em.fork(), jobId, { failed: 'The file is empty: a header row with an "email" column is required' });
        return;
      }
      await setImportTotal(orm.em.fork(), jobId, total);

      let rows: ImportRow[] = [];
      let errors: ImportError[] = [];
      let index = 0;
      const flush = async () => {
        await applyImportChunk(orm.em.fork(), { jobId, projectId: job.projectId, rows, errors, fromRow: offset, processedRows: index });
        offset = index;
        rows = [];
        errors = [];
        ctx?.heartbeat(offset);
      };
      let header = true;
      try {
        for await (const record of records(file)) {
          if (header) {
            header = false;
            continue;
          }
          index += 1;
          if (index <= offset) continue;
          // The header is row 1, so the n-th data row is row n + 1.
          const row = index + 1;
          const raw = record[columns.emailIndex] ?? '';
          const checked = checkEmail(raw);
          if ('reason' in checked) {
            errors.push({ row, email: raw.trim(), reason: checked.reason });
          } else {
            rows.push({ row, email: checked.email, ...recordData(columns, record) });
          }
          if (rows.length + errors.length >= chunkSize) await flush();
        }
        if (rows.length + errors.length > 0) await flush();
      } catch (err) {
        await finishImportJob(orm.em.fork(), jobId, { failed: `The file is not valid CSV: ${(err as Error).message}` });
        return;
      }
      await finishImportJob(orm.em.fork(), jobId, {});
    },

    /** Used by the workflow when every attempt failed: the job must not stay "running". */
    async failContactImport(jobId: string, reason: string): Promise<void> {
      await finishImportJob(orm.em.fork(), jobId, { failed: reason });
    },
  };
}

export type ImportActivities = ReturnType<typeof createImportActivities>;
