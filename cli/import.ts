import { readFile } from 'node:fs/promises';
import { loadConfig } from '../config';
import { queueContactImport } from '../api/use-cases/imports';
import { getImportJob, type ImportJobDto, validateImportFile } from '../db/contacts/imports';
import { ProjectSchema } from '../db/entities/project';
import type { Orm as MikroORM } from '../db/orm';
import { AppError } from '../errors';
import { TemporalGateway } from '../temporal/client';
import { resolveTemporal, type Log } from './services';

export const DEFAULT_IMPORT_TIMEOUT_SECONDS = 600;
const POLL_MS = 250;

export interface ContactsImportArgs {
  file: string;
  projectId: string;
  timeoutSeconds: number;
}

/** Parses `<file> --project <id> [--timeout <seconds>]`; a string is the usage error to show. */
export function parseContactsImportArgs(args: string[]): ContactsImportArgs | string {
  let file: string | undefined;
  let projectId: string | undefined;
  let timeout: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    if (flag === '--project' || flag === '--timeout') {
      const value = inline ?? args[++i];
      if (value === undefined || value.trim() === '') return `${flag} needs a value.`;
      if (flag === '--project') projectId = value.trim();
      else timeout = value.trim();
    } else if (arg.startsWith('--')) {
      return `Unknown option for contacts import: ${arg}`;
    } else if (file === undefined) {
      file = arg;
    } else {
      return `Unexpected argument for contacts import: ${arg}`;
    }
  }
  if (!file?.trim()) return 'contacts import needs a CSV file.';
  if (!projectId) return 'contacts import needs --project <projectId>.';
  const timeoutSeconds = timeout === undefined ? DEFAULT_IMPORT_TIMEOUT_SECONDS : Number(timeout);
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) return `--timeout must be a positive number of seconds, not "${timeout}".`;
  return { file, projectId, timeoutSeconds };
}

/** The job as printed on stdout at the end. */
const printable = (j: ImportJobDto) => ({
  jobId: j.jobId,
  status: j.status,
  totalRows: j.totalRows,
  processedRows: j.processedRows,
  imported: j.imported,
  updated: j.updated,
  skipped: j.skipped,
  errors: j.errors,
});

/** Draws on stderr: a redrawn bar on a terminal, otherwise one line per 10 % (logs stay readable). */
class ProgressBar {
  private lastDecile = -1;
  private lastStatus: string | undefined;
  private drawn = false;
  constructor(private readonly out: NodeJS.WriteStream = process.stderr) {}

  update(j: ImportJobDto): void {
    const pct = j.totalRows > 0 ? Math.min(100, Math.floor((j.processedRows / j.totalRows) * 100)) : j.status === 'completed' ? 100 : 0;
    const counts = `imported ${j.imported}, updated ${j.updated}, skipped ${j.skipped}`;
    if (this.out.isTTY) {
      const width = 30;
      const filled = Math.round((pct / 100) * width);
      const bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
      this.out.write(`\r\x1b[2K${bar} ${j.processedRows}/${j.totalRows} ${String(pct).padStart(3)}% ${j.status} (${counts})`);
      this.drawn = true;
      return;
    }
    const decile = Math.floor(pct / 10);
    if (j.status === this.lastStatus && decile <= this.lastDecile) return;
    this.lastStatus = j.status;
    // Skipped deciles are not back-filled: one line per step actually observed.
    this.lastDecile = Math.max(this.lastDecile, decile);
    this.out.write(`[tidings] import ${j.jobId}: ${j.status} ${j.processedRows}/${j.totalRows} (${pct}%), ${counts}\n`);
  }

  end(): void {
    if (this.drawn) this.out.write('\n');
    this.drawn = false;
  }
}

type WithDatabase = <T>(fn: (orm: MikroORM) => Promise<T>) => Promise<T>;

/**
 * `tidings contacts import <file> --project <id>`: the same checks, job row and workflow as
 * POST /contacts/import, then follows the job until it ends. Exit 0 completed, 1 failed,
 * 2 still queued/running when the timeout passes (no worker consuming the task queue, say).
 */
export async function runContactsImport(
  args: ContactsImportArgs,
  deps: { withDatabase: WithDatabase; log: Log; writeStdout: (text: string) => Promise<void> },
): Promise<number> {
  const { log } = deps;
  return deps.withDatabase(async (orm) => {
    const project = await orm.em.fork().findOne(ProjectSchema, { id: args.projectId });
    if (!project) throw new AppError(404, 'NOT_FOUND', `No project with id "${args.projectId}"; nothing was imported.`);

    let file: Buffer;
    try {
      file = await readFile(args.file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (err as Error).message;
      throw new AppError(400, 'FILE_UNREADABLE', `Cannot read the CSV file "${args.file}": ${why}.`);
    }
    try {
      validateImportFile(file);
    } catch (err) {
      if (err instanceof AppError && err.extra.suggestion) throw new AppError(err.status, err.code, `${err.message}. ${err.extra.suggestion}`);
      throw err;
    }

    const config = loadConfig();
    const temporal = await resolveTemporal(config, log);
    try {
      const gateway = await TemporalGateway.connect(
        { address: temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue },
        config,
      );
      let jobId: string;
      try {
        jobId = await queueContactImport({ temporal: gateway }, orm.em.fork(), project.id, file);
      } finally {
        await gateway.close();
      }
      log(`Import job ${jobId} queued for project ${project.id} (${file.length} bytes)`);
      return await follow(orm, project.id, jobId, args.timeoutSeconds, deps);
    } finally {
      await temporal.stop();
    }
  });
}

async function follow(
  orm: MikroORM,
  projectId: string,
  jobId: string,
  timeoutSeconds: number,
  deps: { log: Log; writeStdout: (text: string) => Promise<void> },
): Promise<number> {
  const bar = new ProgressBar();
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const job = await getImportJob(orm.em.fork(), projectId, jobId);
    bar.update(job);
    const done = job.status === 'completed' || job.status === 'failed';
    if (done || Date.now() >= deadline) {
      bar.end();
      await deps.writeStdout(`${JSON.stringify(printable(job), null, 2)}\n`);
      if (job.status === 'completed') return 0;
      if (job.status === 'failed') {
        deps.log(`Import job ${jobId} failed: ${job.reason ?? 'no reason recorded'}`);
        return 1;
      }
      deps.log(
        `Import job ${jobId} is still ${job.status} after ${timeoutSeconds} s` +
          (job.status === 'queued' ? ' (is a Tidings worker consuming this task queue?)' : '') +
          `; it carries on in the background (job id ${jobId}).`,
      );
      return 2;
    }
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, Math.max(0, deadline - Date.now()))));
  }
}
