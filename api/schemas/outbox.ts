import { z } from 'zod';
import { cursorPage, cursorQuery } from './common';

export const outboxMessageParams = z.object({
  id: z.string().min(1),
  messageId: z.string().min(1).max(300).describe('The `id` of a message in the project outbox list'),
});

export const projectOutboxQuery = cursorQuery;

export const outboxSummarySchema = z
  .object({
    id: z.string().describe('The file name in $DATA_DIR/outbox without `.eml`'),
    emailId: z.string().describe('The email it was built from (GET /emails/:id)'),
    from: z.string(),
    to: z.string(),
    subject: z.string(),
    date: z.string().describe('The Date header (ISO 8601)'),
    dkim: z.string().nullable().describe('`d=<domain> s=<selector>` of the DKIM signature; null when unsigned'),
  })
  .meta({ id: 'OutboxSummary' });

export const outboxPageSchema = cursorPage(outboxSummarySchema);

export const outboxMessageSchema = outboxSummarySchema
  .extend({
    html: z.string().nullable().describe('The HTML part as the recipient gets it (show it sandboxed: it is the sender’s markup)'),
    text: z.string().nullable(),
    headers: z.array(z.object({ name: z.string(), value: z.string() })).describe('Every header line, in order'),
    attachments: z.array(z.object({ filename: z.string(), contentType: z.string(), size: z.number().int() })),
  })
  .meta({ id: 'OutboxMessage' });
