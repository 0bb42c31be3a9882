import { z } from 'zod';
import { EMAIL_SOURCES, EMAIL_STATUSES } from '../../db/messages/emails';
import { cursorQuery } from './common';

export const emailIdParams = z.object({ id: z.uuid().describe('Email id as returned by POST /v1/send') });

export const listEmailsQuery = cursorQuery.extend({
  contactId: z.string().min(1).max(100).optional().describe('Only emails to this contact'),
  status: z.enum(EMAIL_STATUSES).optional().describe('Only emails in this status'),
});

const status = z.enum(EMAIL_STATUSES);
const time = z.string().describe('ISO 8601');
const timeOrNull = z.string().nullable();

export const emailSummarySchema = z
  .object({
    id: z.string(),
    status,
    source: z.enum(EMAIL_SOURCES),
    campaignId: z.string().nullable(),
    templateId: z.string().nullable(),
    contactId: z.string().nullable().describe('Null once the contact was deleted'),
    to: z.string(),
    subject: z.string(),
    attempts: z.number().int().describe('Times the email was handed to the relay'),
    error: z
      .string()
      .nullable()
      .describe(
        "Why it failed, bounced or is being retried (the relay's reply; `suppressed`: the address hard-bounced or complained before, so it was not sent; `project disabled`); null once sent",
      ),
    createdAt: time,
    sentAt: timeOrNull.describe('When the relay accepted it'),
    updatedAt: time,
  })
  .meta({ id: 'EmailSummary' });

const engagement = {
  count: z.number().int(),
  first: timeOrNull,
  last: timeOrNull.describe('Null when none, or recorded before the last time was kept'),
};

export const emailDetailSchema = emailSummarySchema
  .omit({ contactId: true })
  .extend({
    contact: z.object({ id: z.string(), email: z.string() }).nullable().describe('The contact as it is now; null once deleted'),
    from: z.string(),
    lastAttemptAt: timeOrNull,
    relayResponse: z
      .string()
      .nullable()
      .describe("The relay's last answer: its 250 line once sent, its 4xx/5xx reply or the network error after a failed attempt"),
    deliveredAt: timeOrNull,
    bouncedAt: timeOrNull,
    bounceType: z
      .enum(['hard', 'soft'])
      .nullable()
      .describe("Hard: the relay refused the recipient for good (its reply in relayResponse) or a bounce notification said so; the address is then suppressed"),
    complainedAt: timeOrNull,
    opens: z.object(engagement).describe('Opens of the tracking pixel (a click counts as the first open when none came before)'),
    clicks: z
      .object({
        ...engagement,
        links: z
          .array(z.object({ url: z.string(), first: time }))
          .describe('Each tracked link clicked, with its first click (kept with the contact: empty once it is deleted)'),
      })
      .describe('Clicks on tracked links'),
  })
  .meta({ id: 'Email' });
