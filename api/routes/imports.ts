import type { Request } from 'express';
import busboy from 'busboy';
import { validationError } from '../../errors';
import { createImportJob, getImportJob, importTooLarge, MAX_IMPORT_BYTES, validateImportFile } from '../../db/imports';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { importJobParams, importJobSchema, importQueuedResponse } from '../schemas/imports';

export { MAX_IMPORT_BYTES };

const missingFile = (message = 'Send the CSV file as the multipart form part "file"') =>
  validationError([{ field: 'file', message, code: 'required' }]);

/**
 * Reads the multipart form part `file` (at most 5 MB). The whole request is drained before
 * answering, so a client still sending gets its 413 instead of a reset connection.
 */
function readCsvUpload(req: Request): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { fileSize: MAX_IMPORT_BYTES, files: 1 } });
    } catch {
      reject(missingFile('Expected a multipart/form-data request with the CSV file in the form part "file"'));
      return;
    }
    const chunks: Buffer[] = [];
    let found = false;
    let truncated = false;
    parser.on('file', (name, stream) => {
      if (name !== 'file' || found) {
        stream.resume();
        return;
      }
      found = true;
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('limit', () => {
        truncated = true;
      });
    });
    parser.on('error', (err) => reject(missingFile(`The multipart body could not be read: ${(err as Error).message}`)));
    parser.on('close', () => {
      if (truncated) reject(importTooLarge());
      else if (!found) reject(missingFile());
      else resolve(Buffer.concat(chunks));
    });
    req.pipe(parser);
  });
}

export function registerImportRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/contacts/import',
    tag: 'Contacts',
    summary:
      'Import contacts from a CSV file (multipart form part "file", UTF-8, at most 5 MB): answers at once with a queued job; poll GET /contacts/import/{jobId}',
    auth: 'secret',
    response: importQueuedResponse,
    status: 202,
    handler: async ({ scope, project, req }) => {
      const file = await readCsvUpload(req);
      validateImportFile(file);
      const jobId = await createImportJob(scope.em, project.id, file);
      await deps.temporal.startContactImport(project.id, jobId);
      return { jobId, status: 'queued' as const };
    },
  });

  api.add({
    method: 'get',
    path: '/contacts/import/:jobId',
    tag: 'Contacts',
    summary: 'Get an import job: status (queued, running, completed, failed), counters and row errors',
    auth: 'secret',
    params: importJobParams,
    response: importJobSchema,
    handler: ({ scope, project, params }) => getImportJob(scope.em, project.id, params.jobId),
  });
}
