import { z } from 'zod';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../../db/paging';

export const cursorQuery = z.object({
  limit: z.coerce.number().int().min(1).max(MAX_LIMIT).default(DEFAULT_LIMIT).describe('Items per page'),
  cursor: z.string().min(1).optional().describe('The `cursor` of the previous page; absent: the first page'),
});

export const cursorPage = <T extends z.ZodType>(item: T) =>
  z.object({
    data: z.array(item),
    cursor: z.string().nullable().describe('Pass as `cursor` to get the next page; null on the last page'),
    hasMore: z.boolean(),
    total: z.number().int().describe('Filled on the first page only; 0 on later pages'),
  });

export const pageQuery = z.object({
  page: z.coerce.number().int().min(1).default(1).describe('Page number, from 1'),
  pageSize: z.coerce.number().int().min(1).max(MAX_LIMIT).default(DEFAULT_LIMIT).describe('Items per page'),
});

export const errorEnvelope = z
  .object({
    success: z.literal(false),
    message: z.string(),
    error: z.object({
      code: z.string(),
      message: z.string(),
      statusCode: z.number().int(),
      requestId: z.string(),
      errors: z.array(z.object({ field: z.string(), message: z.string(), code: z.string() })).optional(),
      suggestion: z.string().optional(),
    }),
    timestamp: z.string(),
  })
  .meta({ id: 'Error' });

export const idParams = z.object({ id: z.string().min(1) });

/** Free-form JSON (contact data values, template variables). */
export const jsonValue: z.ZodType<unknown> = z.unknown();
