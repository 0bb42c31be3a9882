import { z } from 'zod';

export const importJobParams = z.object({ jobId: z.string().min(1) });

export const importQueuedResponse = z.object({ jobId: z.string(), status: z.literal('queued') });

export const importJobSchema = z.object({
  jobId: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'failed']),
  totalRows: z.number().int(),
  processedRows: z.number().int(),
  imported: z.number().int().describe('New contacts created'),
  updated: z.number().int().describe('Rows merged into an existing contact (also a repeated email in the same file)'),
  skipped: z.number().int().describe('Rows with a missing or invalid email'),
  errors: z.array(
    z.object({
      row: z.number().int().describe('Row number in the file, the header being row 1'),
      email: z.string(),
      reason: z.string().describe('missing_email or invalid_email'),
    }),
  ),
  reason: z.string().optional().describe('Why the file could not be processed (status failed)'),
  createdAt: z.string(),
  updatedAt: z.string(),
});
