import { z } from 'zod';
import { NAME_MAX } from '../../db/templates/templates';
import { checkTemplate, TemplateSyntaxError } from '../../mail/render';
import { cursorQuery } from './common';
import { contactData } from './contacts';

/** Subject and body are compiled when saved: a syntax error is a 422 on that field, never a failed send. */
const templateSource = <T extends z.ZodString>(schema: T) =>
  schema.superRefine((source, ctx) => {
    try {
      checkTemplate(source);
    } catch (err) {
      if (!(err instanceof TemplateSyntaxError)) throw err;
      ctx.addIssue({ code: 'custom', message: `Template syntax error: ${err.message}`, params: { code: 'template_syntax' } });
    }
  });

export const subjectSchema = z
  .string()
  .min(1)
  .max(998)
  .refine((s) => !/[\r\n]/.test(s), 'The subject may not contain line breaks');

const fields = {
  name: z.string().trim().min(1).max(NAME_MAX),
  description: z.string().max(2000).nullable().optional(),
  subject: templateSource(subjectSchema),
  body: templateSource(z.string().min(1).max(1_000_000)),
  from: z.email().nullable().optional().describe('Sender; its domain must be verified in the project'),
  fromName: z.string().max(255).nullable().optional(),
  replyTo: z.email().nullable().optional(),
  type: z.enum(['MARKETING', 'TRANSACTIONAL']).default('TRANSACTIONAL'),
};

export const createTemplateBody = z.object(fields);

export const updateTemplateBody = z
  .object({ ...fields, type: fields.type.removeDefault().optional(), name: fields.name.optional(), subject: fields.subject.optional(), body: fields.body.optional() })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'Send at least one field to change' });

export const templateSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    subject: z.string(),
    body: z.string(),
    from: z.string().nullable(),
    fromName: z.string().nullable(),
    replyTo: z.string().nullable(),
    type: z.enum(['MARKETING', 'TRANSACTIONAL']),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Template' });

export const templateListQuery = cursorQuery;

export const templateUsageSchema = z.object({
  campaigns: z.array(z.object({ id: z.string(), name: z.string() })),
  workflowSteps: z.array(z.object({ workflowId: z.string(), stepId: z.string() })),
});

export const previewTemplateBody = z.object({
  subject: z
    .string()
    .max(998)
    .refine((s) => !/[\r\n]/.test(s), 'The subject may not contain line breaks')
    .describe('Handlebars, as in a template; may be unsaved'),
  body: z.string().max(1_000_000).describe('HTML with Handlebars, as in a template; may be unsaved'),
  type: z.enum(['MARKETING', 'TRANSACTIONAL']).default('TRANSACTIONAL').describe('MARKETING adds the unsubscribe footer, as a send does'),
  contactId: z.string().min(1).optional().describe('Render with this contact; without it, with a stand-in contact that has no data'),
  data: contactData.optional().describe('Per-send data over the contact\'s, as /v1/send `data` (nothing is stored)'),
});

export const templatePreviewSchema = z
  .object({
    subject: z.string(),
    html: z.string().describe('The body as the recipient would get it (without open and click tracking)'),
    contact: z.object({ id: z.string(), email: z.string() }).nullable().describe('The contact rendered for; null for the stand-in'),
    variables: z
      .array(z.object({ name: z.string(), present: z.boolean().describe('The contact (with `data`) has a value for it') }))
      .describe('Variables the subject and body read, in order of first use (names inside each / with blocks are left out)'),
  })
  .meta({ id: 'TemplatePreview' });

export const testTemplateBody = z.object({
  email: z.email().describe('Where the test copy goes; rendered with the contact of that address if there is one'),
});

export const templateTestResponse = z.object({
  emailId: z.string().describe('The queued email'),
  email: z.string(),
  status: z.literal('QUEUED'),
  outbox: z.string().optional().describe('Outbox mode only: where the copy can be read'),
});
