import { z } from 'zod';
import { NAME_MAX } from '../../db/templates/templates';
import { checkTemplate, TemplateSyntaxError } from '../../mail/render';
import { cursorQuery } from './common';

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
