import { z } from 'zod';
import { FEED_TYPE_NOTE, type TypeFilter } from '../../db/insights/feed';
import { MAX_LIMIT } from '../../db/paging';
import { cursorQuery } from './common';

/**
 * An instant: `2026-11-25T10:00:00Z`, `2026-11-25T10:00:00.123+01:00`, or a date `2026-11-25`
 * (midnight UTC; midnight in `timezone` where a route takes one). A datetime without an offset is
 * refused: it would mean a different instant on every server.
 */
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/** The date part names a real day (Date.parse would take 2026-02-30 for March 2). */
const realDay = (s: string) => {
  const [y, m, d] = s.slice(0, 10).split('-').map(Number) as [number, number, number];
  const day = new Date(Date.UTC(y, m - 1, d));
  return day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d;
};

export const instantParam = z
  .string()
  .trim()
  .refine((s) => (DATE_ONLY.test(s) || DATETIME.test(s)) && realDay(s) && !Number.isNaN(Date.parse(DATE_ONLY.test(s) ? `${s}T00:00:00Z` : s)), {
    message: 'Expected an ISO 8601 date (2026-11-25) or date-time with an offset (2026-11-25T10:00:00Z)',
    params: { code: 'invalid_string' },
  });

/** `from` ≤ instant < `to`; both optional. The raw strings stay strings: a date-only value depends on the route's time zone. */
export const rangeShape = {
  from: instantParam.optional().describe('Start, inclusive: ISO date-time with offset, or a date (midnight)'),
  to: instantParam.optional().describe('End, exclusive: ISO date-time with offset, or a date (midnight)'),
};

/** Resolves a validated instant parameter; date-only values are midnight UTC. */
export const toInstant = (s: string): Date => new Date(DATE_ONLY.test(s) ? `${s}T00:00:00Z` : s);
export const isDateOnly = (s: string): boolean => DATE_ONLY.test(s);

/** `to` after `from`, reported on `to` (as `query.to`). */
export const checkRange = <T extends { from?: string; to?: string }>(v: T, ctx: z.RefinementCtx, resolve = toInstant) => {
  if (v.from !== undefined && v.to !== undefined && resolve(v.to).getTime() <= resolve(v.from).getTime()) {
    ctx.addIssue({ code: 'custom', path: ['to'], message: '`to` must be after `from`' });
  }
};

/**
 * `type=email.opened` (exact), `type=email.` or `type=email.*` (prefix), several comma-separated:
 * `type=email.opened,email.clicked,workflow.`.
 */
export const typeFilterParam = z
  .string()
  .trim()
  .min(1)
  .max(1000)
  .transform((raw, ctx): TypeFilter[] => {
    const out: TypeFilter[] = [];
    for (const part of raw.split(',').map((p) => p.trim())) {
      if (!part || part.length > 255 || part === '*') {
        ctx.addIssue({ code: 'custom', message: 'Each type is 1 to 255 characters: an exact type, or a prefix ending in "." or "*"' });
        return z.NEVER;
      }
      if (part.endsWith('*')) out.push({ value: part.slice(0, -1), prefix: true });
      else out.push({ value: part, prefix: part.endsWith('.') });
    }
    return out;
  })
  .describe(
    'Activity types, comma-separated; each exact (`email.opened`) or a prefix ending in "." or "*" (`email.`, `segment.*`). ' +
      FEED_TYPE_NOTE,
  );

const filterShape = {
  type: typeFilterParam.optional(),
  contactId: z.string().min(1).optional().describe('Only activity of this contact (campaign activity has no contact and drops out)'),
  ...rangeShape,
};

export const listFeedQuery = cursorQuery.extend(filterShape).superRefine((v, ctx) => checkRange(v, ctx));

export const feedStatsQuery = z.object(filterShape).superRefine((v, ctx) => checkRange(v, ctx));

export const recentCountQuery = z.object({
  minutes: z.coerce.number().int().min(1).max(1440).default(5).describe('Window length in minutes, 1 to 1440 (default 5)'),
  type: typeFilterParam.optional(),
  contactId: filterShape.contactId,
});

export const upcomingQuery = z.object({
  limit: z.coerce.number().int().min(1).max(MAX_LIMIT).default(20).describe('Most items per list (default 20, at most 100)'),
});

export const feedItemSchema = z
  .object({
    id: z.string().describe('Event id (`evt_…`), or `<executionId>:started|completed`, `<campaignId>:scheduled|sent`'),
    type: z.string().describe('Activity type; `event.tracked` for events the client tracked'),
    name: z.string().describe('The event name (what was tracked); equal to `type` for everything else'),
    contactId: z.string().nullable(),
    email: z.string().nullable().describe('The contact\'s email, when the activity has a contact'),
    data: z.record(z.string(), z.unknown()).describe('Event data; for workflow and campaign activity their ids and names'),
    createdAt: z.string(),
  })
  .meta({ id: 'Activity' });

export const feedStatsResponse = z.object({
  total: z.number().int().describe('Activity matching the filters'),
  last24h: z.number().int().describe('Of those, in the last 24 hours'),
  last7d: z.number().int().describe('Of those, in the last 7 days'),
  byType: z.array(z.object({ type: z.string(), count: z.number().int() })).describe('Per type, most frequent first (ties by type)'),
});

export const recentCountResponse = z.object({
  count: z.number().int(),
  since: z.string().describe('Start of the window: now minus `minutes`'),
});

export const feedTypesResponse = z.object({
  types: z.array(z.string()).describe('Types that occur in the project\'s activity, sorted'),
});

export const upcomingResponse = z.object({
  campaigns: z
    .array(z.object({ id: z.string(), name: z.string(), scheduledFor: z.string() }))
    .describe('SCHEDULED campaigns, soonest first'),
  executions: z
    .array(
      z.object({
        id: z.string(),
        workflowId: z.string(),
        workflowName: z.string(),
        contactId: z.string(),
        email: z.string().nullable(),
        waitingForEvent: z.string().nullable().describe('Null while a DELAY step holds the execution'),
        currentStepId: z.string().nullable(),
        startedAt: z.string(),
        waitingSince: z.string().describe('When the current step began'),
      }),
    )
    .describe('WAITING workflow executions (DELAY or WAIT_FOR_EVENT), longest waiting first'),
});
