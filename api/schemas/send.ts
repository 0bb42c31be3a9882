import { z } from 'zod';
import { contactData } from './contacts';

const MB = 1024 * 1024;
export const ATTACHMENTS_MAX_BYTES = 10 * MB;
export const MESSAGE_MAX_BYTES = 40 * MB;
export const MAX_RECIPIENTS = 100;

const mailbox = z.object({ name: z.string().max(255).optional(), email: z.email() });
const address = z.union([z.email(), mailbox]);

// Headers the service writes itself; letting a caller set them would break threading, DKIM or MIME.
const MANAGED_HEADERS = new Set([
  'from', 'to', 'cc', 'bcc', 'subject', 'reply-to', 'message-id', 'date', 'mime-version',
  'content-type', 'content-transfer-encoding', 'dkim-signature', 'sender', 'return-path',
]);

const headerName = z
  .string()
  .min(1)
  .max(255)
  .refine((n) => !/[\r\n]/.test(n), 'Header names may not contain CR or LF')
  .refine((n) => /^[!-9;-~]+$/.test(n), 'Header names are printable ASCII without spaces or colons')
  .refine((n) => !MANAGED_HEADERS.has(n.toLowerCase()), 'This header is set by the service');

const headerValue = z
  .string()
  .max(998, 'Header values are at most 998 characters')
  .refine((v) => !/[\r\n]/.test(v), 'Header values may not contain CR or LF');

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const attachment = z.object({
  filename: z.string().min(1).max(255).refine((f) => !/[\r\n]/.test(f), 'No line breaks in file names'),
  content: z
    .string()
    .min(1)
    .refine((c) => BASE64.test(c.replace(/\s+/g, '')), 'Must be base64-encoded'),
  contentType: z.string().regex(/^[\w.+-]+\/[\w.+-]+$/, 'Must be a MIME type such as application/pdf'),
  contentId: z.string().max(255).optional(),
  disposition: z.enum(['attachment', 'inline']).optional(),
});

export const decodedSize = (base64: string) => Buffer.byteLength(base64.replace(/\s+/g, ''), 'base64');

export const sendBody = z
  .object({
    to: z.union([address, z.array(address).min(1).max(MAX_RECIPIENTS)]),
    subject: z
      .string()
      .min(1)
      .max(998)
      .refine((s) => !/[\r\n]/.test(s), 'The subject may not contain line breaks')
      .optional(),
    body: z.string().min(1).optional(),
    type: z
      .enum(['html', 'markdown'], { error: 'Must be "html" or "markdown"' })
      .optional()
      .describe('How the body (given or the template\'s) is written: html (default), or markdown, rendered to HTML before the variables are filled in'),
    template: z.string().min(1).optional().describe('Template id; its subject, body, sender and reply-to apply unless given here'),
    from: address
      .optional()
      .describe(
        "Sender: an address or {name, email} on a domain of the project. Required unless `template` is given and that template has a sender (its `from`); given, it replaces the template's",
      ),
    name: z.string().max(255).optional().describe('Deprecated: sender name when `from` is a string'),
    reply: z.email().optional(),
    data: contactData.optional(),
    subscribed: z.boolean().optional().describe('New contacts default to false; omitted keeps an existing contact\'s state'),
    headers: z.record(headerName, headerValue).optional(),
    attachments: z.array(attachment).max(10, 'At most 10 attachments').optional(),
    tracking: z
      .boolean()
      .optional()
      .describe('Open and click tracking (pixel, rewritten links); default: on for MARKETING templates, off otherwise'),
  })
  .superRefine((b, ctx) => {
    if (!b.template) {
      if (!b.subject) ctx.addIssue({ code: 'custom', path: ['subject'], message: 'Required when no template is given' });
      if (!b.body) ctx.addIssue({ code: 'custom', path: ['body'], message: 'Required when no template is given' });
    }
    const total = (b.attachments ?? []).reduce((n, a) => n + decodedSize(a.content), 0);
    if (total > ATTACHMENTS_MAX_BYTES) {
      ctx.addIssue({ code: 'too_big', origin: 'number', maximum: ATTACHMENTS_MAX_BYTES, path: ['attachments'], message: 'Attachments may total at most 10 MB' });
    }
  });

export type SendBody = z.output<typeof sendBody>;

export const sendResponse = z.object({
  success: z.literal(true),
  data: z.object({
    emails: z.array(z.object({ contact: z.object({ id: z.string(), email: z.string() }), email: z.string().describe('Email id (UUID)') })),
    timestamp: z.string(),
    outbox: z
      .string()
      .optional()
      .describe('Present in outbox mode (no SMTP_URL configured): the mail is written to the local outbox, not sent'),
  }),
});
