import { z } from 'zod';
import { addStaticMembers, previewMembers, removeStaticMembers, segmentContacts } from '../../db/segments/members';
import { createSegment, deleteSegment, getSegment, listSegments, updateSegment } from '../../db/segments/segments';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { idParams } from '../schemas/common';
import {
  addMembersBody,
  addMembersResponse,
  computeResponse,
  createSegmentBody,
  previewSegmentBody,
  refreshResponse,
  removeMembersBody,
  removeMembersResponse,
  segmentContactsQuery,
  segmentContactsResponse,
  segmentPreviewResponse,
  segmentSchema,
  updateSegmentBody,
} from '../schemas/segments';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { recomputeSegment, refreshSegment, saveSegment } from '../use-cases/segments';

export function registerSegmentRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/segments',
    tag: 'Segments',
    summary: 'List all segments, newest first (no pagination; memberCount is the cached count)',
    auth: 'secret',
    response: z.array(segmentSchema),
    handler: ({ scope, project }) => listSegments(scope.em, project.id),
  });

  api.add({
    method: 'post',
    path: '/segments',
    tag: 'Segments',
    summary: 'Create a segment: DYNAMIC needs a condition, STATIC rejects one (its members are added separately); counted at once',
    description: `A DYNAMIC segment is every contact matching its \`condition\`, evaluated when it is used
(\`GET /segments/{id}/contacts\`, a campaign's audience); \`memberCount\` is a cached count. A condition is one filter
\`{field, operator, value?, unit?}\` or a group \`{logic: "AND"|"OR", groups: [{filters: [...], conditions?: <group>}]}\`.

- \`email\`, \`subscribed\`, \`createdAt\`, \`updatedAt\`, \`data.<path>\`: equals, notEquals, contains,
  notContains, greaterThan, lessThan, greaterThanOrEqual, lessThanOrEqual, exists, notExists, and for
  dates within / olderThan (\`value\` + \`unit\`). Data compares by the field's type; a missing field never
  matches a comparison.
- \`event.<name>\` and \`email.<sent|delivered|opened|clicked|bounced|complained>\`: triggered,
  notTriggered, triggeredWithin, triggeredOlderThan.
- \`segment.<id>\`: memberOfSegment, notMemberOfSegment.

A STATIC segment holds the contacts added with \`POST /segments/{id}/members\`. With \`trackMembership\`,
\`POST /segments/{id}/compute\` records who entered and left, as \`segment.<slug>.entry\` / \`.exit\`
events that can trigger workflows.`,
    examples: {
      request: {
        dynamic: {
          summary: 'Pro-plan contacts who signed up in the last 7 days',
          value: {
            name: 'New pro customers',
            condition: {
              logic: 'AND',
              groups: [
                {
                  filters: [
                    { field: 'data.plan', operator: 'equals', value: 'pro' },
                    { field: 'event.signed-up', operator: 'triggeredWithin', value: 7, unit: 'days' },
                  ],
                },
              ],
            },
          },
        },
        static: { summary: 'A list you fill yourself', value: { name: 'Beta testers', type: 'STATIC' } },
      },
    },
    auth: 'secret',
    body: createSegmentBody,
    response: segmentSchema,
    status: 201,
    handler: ({ scope, project, body }) => saveSegment(deps, project.id, () => createSegment(scope.em, project.id, body)),
  });

  api.add({
    method: 'post',
    path: '/segments/preview',
    tag: 'Segments',
    summary: 'Count the contacts a condition (saved or not) matches now, with the newest of them; nothing is written',
    description: `The condition is validated and evaluated as a DYNAMIC segment's (same rules, same query), so \`count\` is the
\`memberCount\` saving it would store. Give \`segmentId\` when editing a segment, so a reference back to it is refused.`,
    auth: 'secret',
    body: previewSegmentBody,
    response: segmentPreviewResponse,
    handler: ({ scope, project, body }) => previewMembers(scope.em, project.id, body),
  });

  api.add({
    method: 'get',
    path: '/segments/:id',
    tag: 'Segments',
    summary: 'Get a segment, with its cached memberCount',
    auth: 'secret',
    params: idParams,
    response: segmentSchema,
    handler: ({ scope, project, params }) => getSegment(scope.em, project.id, params.id),
  });

  api.add({
    method: 'patch',
    path: '/segments/:id',
    tag: 'Segments',
    summary: 'Update name, description, condition (DYNAMIC only; recounted) or trackMembership',
    auth: 'secret',
    params: idParams,
    body: updateSegmentBody,
    response: segmentSchema,
    handler: ({ scope, project, params, body }) => saveSegment(deps, project.id, () => updateSegment(scope.em, project.id, params.id, body)),
  });

  api.add({
    method: 'delete',
    path: '/segments/:id',
    tag: 'Segments',
    summary: 'Delete a segment; 409 while a scheduled or sending campaign uses it',
    errors: { 409: '`CONFLICT`: a SCHEDULED or SENDING campaign uses the segment' },
    auth: 'secret',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteSegment(scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });

  api.add({
    method: 'get',
    path: '/segments/:id/contacts',
    tag: 'Segments',
    summary: 'Members, newest contacts first (page-based); a DYNAMIC segment is evaluated now',
    auth: 'secret',
    params: idParams,
    query: segmentContactsQuery,
    response: segmentContactsResponse,
    handler: ({ scope, project, params, query }) => segmentContacts(scope.em, project.id, params.id, query.page, query.pageSize),
  });

  api.add({
    method: 'post',
    path: '/segments/:id/members',
    tag: 'Segments',
    summary: 'Add contacts to a STATIC segment by email (createMissing creates unknown ones)',
    errors: { 409: '`CONFLICT`: the segment is DYNAMIC; change its condition instead' },
    auth: 'secret',
    params: idParams,
    body: addMembersBody,
    response: addMembersResponse,
    handler: ({ scope, project, params, body }) => addStaticMembers(scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'delete',
    path: '/segments/:id/members',
    tag: 'Segments',
    summary: 'Remove contacts from a STATIC segment by email',
    errors: { 409: '`CONFLICT`: the segment is DYNAMIC; change its condition instead' },
    auth: 'secret',
    params: idParams,
    body: removeMembersBody,
    response: removeMembersResponse,
    handler: ({ scope, project, params, body }) => removeStaticMembers(scope.em, project.id, params.id, body.emails),
  });

  api.add({
    method: 'post',
    path: '/segments/:id/compute',
    tag: 'Segments',
    summary:
      'Recompute the membership of a tracked DYNAMIC segment (a Temporal workflow): writes it, fires segment.<slug>.entry / .exit events, which trigger workflows',
    errors: { 409: '`CONFLICT`: only a DYNAMIC segment with `trackMembership` can be computed', 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    params: idParams,
    response: computeResponse,
    handler: ({ scope, project, params }) => recomputeSegment(deps, scope.em, project.id, params.id),
  });

  api.add({
    method: 'post',
    path: '/segments/:id/refresh',
    tag: 'Segments',
    summary: 'Refresh the cached member count only: no membership writes, no events',
    auth: 'secret',
    params: idParams,
    response: refreshResponse,
    handler: ({ scope, project, params }) => refreshSegment(deps, scope.em, project.id, params.id),
  });
}
