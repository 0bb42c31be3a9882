import { getBulkJob, type BulkOperation } from '../../db/contacts/bulk-jobs';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { bulkAccepted, bulkBody, bulkJobParams, bulkJobSchema } from '../schemas/bulk';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { queueBulkJob } from '../use-cases/bulk';

const SUMMARIES: Record<BulkOperation, string> = {
  subscribe: 'Subscribe up to 1,000 contacts (by id) in a background job; each change emits contact.subscribed',
  unsubscribe: 'Unsubscribe up to 1,000 contacts (by id) in a background job; each change emits contact.unsubscribed',
  delete: 'Delete up to 1,000 contacts (by id) in a background job: their active executions are cancelled, memberships removed',
};

/** Registered before `/contacts/:id`, which would take `bulk` for an id. */
export function registerBulkRoutes(api: RouteRegistry, deps: AppDeps): void {
  for (const operation of ['subscribe', 'unsubscribe', 'delete'] as const) {
    api.add({
      method: 'post',
      path: `/contacts/bulk-${operation}`,
      tag: 'Contacts',
      summary: SUMMARIES[operation],
      errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
      auth: 'secret',
      body: bulkBody,
      response: bulkAccepted,
      status: 202,
      handler: ({ scope, project, body }) => queueBulkJob(deps, scope.em, project.id, operation, (body.ids ?? body.contactIds)!),
    });
  }

  api.add({
    method: 'get',
    path: '/contacts/bulk/:jobId',
    tag: 'Contacts',
    summary: 'Progress and outcome of a bulk contact job',
    auth: 'secret',
    params: bulkJobParams,
    response: bulkJobSchema,
    handler: ({ scope, project, params }) => getBulkJob(scope.em, project.id, params.jobId),
  });
}
