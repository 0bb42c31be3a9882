import { z } from 'zod';
import { cursorQuery } from './common';
import { segmentCondition } from './segments';

/**
 * The query of GET /contacts. Apart from api/schemas/contacts.ts because the condition is a segment
 * condition, and api/schemas/segments.ts itself builds on the contact schema.
 */
export const listContactsQuery = cursorQuery.extend({
  search: z.string().max(320).optional().describe('Substring of the email, case-insensitive'),
  subscribed: z
    .enum(['true', 'false'])
    .optional()
    .describe('true: only subscribed contacts; false: only unsubscribed ones; absent: both')
    .transform((v) => (v === undefined ? undefined : v === 'true')),
  condition: z
    .string()
    .max(20_000)
    .optional()
    .describe(
      'Only the contacts matching this condition, as JSON: a filter {field, operator, value?, unit?} or a group ' +
        '{logic, groups}, with the rules of a DYNAMIC segment (POST /segments). URL-encode it',
    )
    .transform((text, ctx) => {
      if (text === undefined) return undefined;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'Not valid JSON: send the condition as JSON, URL-encoded' });
        return z.NEVER;
      }
    })
    .pipe(segmentCondition.optional()),
});
