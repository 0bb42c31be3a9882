import { z } from 'zod';
import {
  type Condition,
  CONDITION_OPERATORS,
  type ConditionGroup,
  DURATION_UNITS,
  MAX_DATA_PATH_SEGMENTS,
  operatorsFor,
  parseConditionField,
  TIMED_OPERATORS,
  VALUELESS_OPERATORS,
} from '../../db/conditions/grammar';
import { pageQuery } from './common';
import { contactSchema } from './contacts';

/** Limits that keep one compiled condition a reasonable statement. */
const MAX_FILTERS = 100;
const MAX_DEPTH = 5;
/** Durations up to about 2,700 years in days: any larger is "ever". */
const MAX_DURATION = 1_000_000;

export const segmentFilter = z
  .object({
    field: z
      .string()
      .min(1)
      .max(300)
      .describe(
        'email, subscribed, createdAt, updatedAt, data.<path>, event.<name>, email.<sent|delivered|opened|clicked|bounced|complained>, segment.<segmentId>',
      ),
    operator: z.enum(CONDITION_OPERATORS),
    value: z.union([z.string().max(1000), z.number(), z.boolean()]).optional(),
    unit: z.enum(DURATION_UNITS).optional().describe('With within, olderThan, triggeredWithin, triggeredOlderThan'),
  })
  .superRefine((f, ctx) => {
    const field = parseConditionField(f.field);
    if (!field) {
      ctx.addIssue({
        code: 'custom',
        path: ['field'],
        message: 'Unknown field: use email, subscribed, createdAt, updatedAt, data.<path>, event.<name>, email.<activity> or segment.<id>',
        params: { code: 'unknown_field' },
      });
      return;
    }
    if (field.kind === 'data' && field.path.split('.').length > MAX_DATA_PATH_SEGMENTS) {
      ctx.addIssue({ code: 'custom', path: ['field'], message: `A data path has at most ${MAX_DATA_PATH_SEGMENTS} segments`, params: { code: 'too_deep' } });
    }
    if (!operatorsFor(field).includes(f.operator)) {
      ctx.addIssue({
        code: 'custom',
        path: ['operator'],
        message: `${f.field} takes ${operatorsFor(field).join(', ')}`,
        params: { code: 'operator_not_allowed' },
      });
      return;
    }
    if (!VALUELESS_OPERATORS.includes(f.operator) && f.value === undefined) {
      ctx.addIssue({ code: 'custom', path: ['value'], message: `The ${f.operator} operator needs a value`, params: { code: 'required' } });
    }
    if (TIMED_OPERATORS.includes(f.operator)) {
      if (typeof f.value !== 'number' || f.value < 0 || f.value > MAX_DURATION) {
        ctx.addIssue({
          code: 'custom',
          path: ['value'],
          message: `The ${f.operator} operator needs a number of units from 0 to ${MAX_DURATION}`,
          params: { code: 'invalid_duration' },
        });
      }
      if (f.unit === undefined) {
        ctx.addIssue({ code: 'custom', path: ['unit'], message: `The ${f.operator} operator needs a unit: minutes, hours or days`, params: { code: 'required' } });
      }
    }
  });

const logic = z.enum(['AND', 'OR']);

export const segmentConditionGroup: z.ZodType<ConditionGroup> = z
  .object({
    logic: logic.describe('How the groups combine; inside a group, its filters and nested condition all hold'),
    get groups() {
      return z
        .array(
          z
            .object({
              filters: z.array(segmentFilter),
              get conditions() {
                return segmentConditionGroup.optional();
              },
            })
            .refine((g) => g.filters.length > 0 || g.conditions !== undefined, { message: 'A group needs a filter or a nested condition' }),
        )
        .min(1);
    },
  })
  .meta({ id: 'SegmentConditionGroup' });

function depth(c: Condition): number {
  return 'field' in c ? 0 : 1 + Math.max(0, ...c.groups.map((g) => (g.conditions ? depth(g.conditions) : 0)));
}
function filterCount(c: Condition): number {
  return 'field' in c ? 1 : c.groups.reduce((n, g) => n + g.filters.length + (g.conditions ? filterCount(g.conditions) : 0), 0);
}

/** Zod reports a failed union branch by branch; name the errors of the shape that was meant. */
function unionMessage(issue: { input?: unknown; errors?: { path: PropertyKey[]; message: string }[][] }): string {
  const meantGroup = typeof issue.input === 'object' && issue.input !== null && 'logic' in issue.input;
  const branch = issue.errors?.[meantGroup ? 0 : 1] ?? [];
  const details = branch.map((e) => `${e.path.map(String).join('.') || '(condition)'}: ${e.message}`).join('; ');
  return `Invalid condition (a filter {field, operator, value?, unit?} or a group {logic, groups})${details ? `: ${details}` : ''}`;
}

export const segmentCondition = z
  .union([segmentConditionGroup, segmentFilter], { error: (issue) => unionMessage(issue as Parameters<typeof unionMessage>[0]) })
  .superRefine((c, ctx) => {
    if (depth(c) > MAX_DEPTH) ctx.addIssue({ code: 'custom', message: `Conditions nest at most ${MAX_DEPTH} levels`, params: { code: 'too_deep' } });
    if (filterCount(c) > MAX_FILTERS) ctx.addIssue({ code: 'custom', message: `A condition has at most ${MAX_FILTERS} filters`, params: { code: 'too_many_filters' } });
  })
  .describe('A single filter, or a group {logic: AND|OR, groups: [{filters: [...], conditions?: <group>}]}');

const name = z.string().trim().min(1).max(255);
const description = z.string().max(2000).nullable().optional();

export const createSegmentBody = z.object({
  name,
  description,
  type: z.enum(['DYNAMIC', 'STATIC']).default('DYNAMIC'),
  condition: segmentCondition.optional().describe('Required for DYNAMIC; rejected for STATIC'),
  trackMembership: z.boolean().default(false).describe('Keep the membership and fire segment.<slug>.entry / .exit events on compute'),
});

export const updateSegmentBody = z
  .object({
    name: name.optional(),
    description,
    condition: segmentCondition.optional().describe('DYNAMIC segments only'),
    trackMembership: z.boolean().optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'Send at least one of name, description, condition, trackMembership' });

export const previewSegmentBody = z.object({
  condition: segmentCondition,
  limit: z.number().int().min(0).max(50).default(10).describe('How many matching contacts to return, newest first'),
  segmentId: z.string().min(1).optional().describe('The segment being edited: a condition that refers back to it is refused, as on save'),
});

export const segmentPreviewResponse = z.object({
  count: z.number().int().describe('Contacts matching the condition now (what saving it would store as memberCount)'),
  sample: z.array(contactSchema).describe('The newest of them, up to `limit`'),
});

export const segmentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    type: z.enum(['DYNAMIC', 'STATIC']),
    condition: z.unknown().nullable().describe('The condition as saved; null for STATIC'),
    trackMembership: z.boolean(),
    memberCount: z.number().int().describe('Cached; refreshed on create, condition change, member changes, /refresh and /compute'),
    memberCountUpdatedAt: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Segment' });

export const segmentContactsQuery = pageQuery;

export const segmentContactsResponse = z.object({
  data: z.array(contactSchema),
  total: z.number().int(),
  page: z.number().int(),
  pageSize: z.number().int(),
});

const emails = z.array(z.email().max(320)).min(1).max(1000);

export const addMembersBody = z.object({
  emails,
  createMissing: z.boolean().default(false).describe('Create contacts for emails that are not contacts yet'),
  subscribed: z.boolean().default(true).describe('Subscription state of contacts created here (existing ones keep theirs)'),
});

export const addMembersResponse = z.object({
  added: z.number().int().describe('New memberships (contacts already in the segment are not counted)'),
  created: z.number().int().describe('Contacts created (createMissing)'),
  notFound: z.array(z.string()).describe('Emails, as sent, that are not contacts of the project'),
});

export const removeMembersBody = z.object({ emails });
export const removeMembersResponse = z.object({ removed: z.number().int() });

export const computeResponse = z.object({
  added: z.number().int().describe('Contacts that entered (one segment.<slug>.entry event each)'),
  removed: z.number().int().describe('Contacts that left (one segment.<slug>.exit event each)'),
  total: z.number().int(),
});

export const refreshResponse = z.object({ memberCount: z.number().int() });

const ref = z.object({ id: z.string(), name: z.string() });

export const fieldUsageResponse = z.object({
  field: z.string(),
  segments: z.array(ref).describe('Segments with a filter on the field'),
  campaigns: z.array(ref.extend({ status: z.string() })).describe('Campaigns whose segment filters on the field'),
  workflows: z
    .array(z.object({ workflowId: z.string(), workflowName: z.string(), stepId: z.string(), stepName: z.string().nullable(), field: z.string() }))
    .describe('CONDITION steps reading the field'),
});
