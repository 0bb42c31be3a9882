import { getImportJob, importTooLarge, MAX_IMPORT_BYTES, validateImportFile } from '../../db/contacts/imports';
import type { AppDeps } from '../context';
import { readSingleFile } from '../multipart';
import type { RouteRegistry } from '../routing';
import { importJobParams, importJobSchema, importQueuedResponse } from '../schemas/imports';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { queueContactImport } from '../use-cases/imports';

export { MAX_IMPORT_BYTES };

export function registerImportRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/contacts/import',
    tag: 'Contacts',
    summary:
      'Import contacts from a CSV file (multipart form part "file", UTF-8, at most 5 MB): answers at once with a queued job; poll GET /contacts/import/{jobId}',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    response: importQueuedResponse,
    status: 202,
    handler: async ({ scope, project, req }) => {
      const file = await readSingleFile(req, { parts: ['file'], maxBytes: MAX_IMPORT_BYTES, what: 'the CSV file', tooLarge: importTooLarge });
      validateImportFile(file);
      const jobId = await queueContactImport(deps, scope.em, project.id, file);
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
