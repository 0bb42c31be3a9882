import { z } from 'zod';

const email = z.email().max(320);

export const contactData = z
  .record(z.string().min(1).max(255), z.unknown())
  .describe(
    'Patch of custom fields: null removes a key, "" is ignored, {value, persistent:false} is used once and not stored; reserved keys are dropped.',
  );

export const contactSchema = z
  .object({
    id: z.string().describe('cnt_… id'),
    email: z.string(),
    subscribed: z.boolean(),
    data: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Contact' });

export const createContactBody = z.object({
  email,
  subscribed: z.boolean().optional().describe('Default true for a new contact; omitted keeps an existing contact\'s state'),
  data: contactData.optional(),
});

export const upsertContactResponse = contactSchema.extend({
  _meta: z.object({ isNew: z.boolean(), isUpdate: z.boolean() }),
});

export const updateContactBody = z
  .object({ email: email.optional(), subscribed: z.boolean().optional(), data: contactData.optional() })
  .refine((b) => b.email !== undefined || b.subscribed !== undefined || b.data !== undefined, {
    message: 'Send at least one of email, subscribed, data',
  });

export const lookupBody = z.object({ emails: z.array(z.string().min(1).max(320)).min(1).max(500) });

export const lookupResponse = z.object({
  found: z.array(z.object({ id: z.string(), email: z.string() })),
  notFound: z.array(z.string()),
});

export const fieldDescriptor = z.object({
  field: z.string(),
  type: z.enum(['string', 'number', 'boolean', 'date']),
  isCustom: z.boolean(),
  coverage: z
    .number()
    .min(0)
    .max(1)
    .describe('Share of the contacts that have the field; above 10,000 contacts, estimated from a random sample of about 10,000'),
});

export const fieldParams = z.object({ field: z.string().min(1).max(260) });

export const fieldValuesQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) });

export const fieldValuesResponse = z.object({ field: z.string(), values: z.array(z.unknown()), count: z.number().int() });

export const deleteFieldResponse = z.object({ field: z.string(), removed: z.number().int().describe('Contacts the key was removed from') });
