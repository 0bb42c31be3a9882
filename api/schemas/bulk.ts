import { z } from 'zod';
import { BULK_JOB_STATUSES, BULK_OPERATIONS, MAX_BULK_IDS } from '../../db/contacts/bulk-jobs';

const idList = z.array(z.string().min(1).max(200)).min(1).max(MAX_BULK_IDS);

/** `ids`, or `contactIds` as an alias (both in the OpenAPI description). */
export const bulkBody = z
  .object({
    ids: idList.optional().describe(`1 to ${MAX_BULK_IDS} contact ids`),
    contactIds: idList.optional().describe('An alias of ids'),
  })
  .refine((b) => b.ids !== undefined || b.contactIds !== undefined, { message: 'Give ids (or contactIds)', path: ['ids'] })
  .refine((b) => b.ids === undefined || b.contactIds === undefined, {
    message: 'Give ids or contactIds, not both',
    path: ['contactIds'],
  });

export const bulkAccepted = z.object({ jobId: z.string(), status: z.enum(BULK_JOB_STATUSES) });

export const bulkJobParams = z.object({ jobId: z.string().min(1) });

export const bulkJobSchema = z
  .object({
    jobId: z.string(),
    operation: z.enum(BULK_OPERATIONS),
    status: z.enum(BULK_JOB_STATUSES),
    total: z.number().int().describe('Distinct ids in the request'),
    processed: z.number().int(),
    succeeded: z.number().int().describe('Changed (subscribe/unsubscribe) or deleted'),
    unchanged: z.number().int().describe('Already in the requested state'),
    failed: z.number().int(),
    errors: z.array(z.object({ contactId: z.string(), reason: z.string() })).describe('reason not_found: unknown, or another project'),
  })
  .meta({ id: 'BulkJob' });
