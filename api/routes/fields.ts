import { z } from 'zod';
import { fieldValues, listFields } from '../../db/contacts/fields';
import { fieldUsage } from '../../db/insights/field-usage';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { deleteFieldResponse, fieldDescriptor, fieldParams, fieldValuesQuery, fieldValuesResponse } from '../schemas/contacts';
import { fieldUsageResponse } from '../schemas/segments';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { deleteCustomField } from '../use-cases/contact-fields';

export function registerFieldRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/contacts/fields',
    tag: 'Contact fields',
    summary: 'Standard and custom fields with their inferred type and coverage (0..1)',
    auth: 'secret',
    response: z.object({ fields: z.array(fieldDescriptor) }),
    handler: async ({ scope, project }) => ({ fields: await listFields(scope.em, project.id) }),
  });

  api.add({
    method: 'get',
    path: '/contacts/fields/:field/values',
    tag: 'Contact fields',
    summary: 'Distinct values of a field, most frequent first',
    auth: 'secret',
    params: fieldParams,
    query: fieldValuesQuery,
    response: fieldValuesResponse,
    handler: ({ scope, project, params, query }) => fieldValues(scope.em, project.id, params.field, query.limit),
  });

  api.add({
    method: 'get',
    path: '/contacts/fields/:field/usage',
    tag: 'Contact fields',
    summary: 'Segments, campaigns and workflow CONDITION steps that reference the field',
    auth: 'secret',
    params: fieldParams,
    response: fieldUsageResponse,
    handler: ({ scope, project, params }) => fieldUsage(scope.em, project.id, params.field),
  });

  api.add({
    method: 'delete',
    path: '/contacts/fields/:field',
    tag: 'Contact fields',
    summary: 'Remove a custom field from every contact (in bounded batches, as a Temporal workflow)',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    params: fieldParams,
    response: deleteFieldResponse,
    handler: ({ scope, project, params }) => deleteCustomField(deps, scope.em, project.id, params.field),
  });
}
