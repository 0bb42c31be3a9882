import { z } from 'zod';
import { CAMPAIGN_NAME_MAX } from '../../db/campaigns/campaigns';
import { checkTemplate, TemplateSyntaxError } from '../../mail/render';
import { cursorQuery } from './common';
import { subjectSchema } from './templates';

/** Subject and body are compiled when saved: a syntax error is a 422 on that field, never a failed send. */
const templateSource = <T extends z.ZodType<string>>(schema: T) =>
  schema.superRefine((source, ctx) => {
    try {
      checkTemplate(source);
    } catch (err) {
      if (!(err instanceof TemplateSyntaxError)) throw err;
      ctx.addIssue({ code: 'custom', message: `Template syntax error: ${err.message}`, params: { code: 'template_syntax' } });
    }
  });

const datetime = z.iso.datetime({ offset: true });

const fields = {
  name: z.string().trim().min(1).max(CAMPAIGN_NAME_MAX),
  description: z.string().max(2000).nullable().optional(),
  subject: templateSource(subjectSchema),
  body: templateSource(z.string().min(1).max(1_000_000)),
  from: z.email().describe('Sender; its domain must be verified in the project'),
  fromName: z.string().max(255).nullable().optional(),
  replyTo: z.email().nullable().optional(),
  type: z
    .enum(['MARKETING', 'TRANSACTIONAL'])
    .default('MARKETING')
    .describe('MARKETING mail goes to subscribed contacts only, with List-Unsubscribe headers and open/click tracking'),
  segmentId: z.string().min(1).nullable().optional().describe('Audience: the subscribed members of this segment; null or absent: every subscribed contact'),
};

export const createCampaignBody = z.object(fields);

/**
 * PUT replaces the campaign: fields left out take their defaults. Read-only fields a client copied
 * from GET (id, status, stats, …) are ignored. `scheduledFor` moves a SCHEDULED campaign.
 */
export const replaceCampaignBody = z.object({
  ...fields,
  scheduledFor: datetime
    .nullable()
    .optional()
    .describe('SCHEDULED campaigns only: a new future send time. A draft is scheduled with POST /campaigns/:id/send'),
});

export const sendCampaignBody = z.object({
  scheduledFor: datetime.optional().describe('Send at this future time (ISO 8601 with offset); absent: send now'),
});

export const testCampaignBody = z.object({
  email: z.email().describe('Where the test copy goes; rendered with the contact of that address if there is one'),
});

export const campaignStatsSchema = z
  .object({
    totalRecipients: z.number().int(),
    sent: z.number().int(),
    delivered: z.number().int(),
    opened: z.number().int(),
    clicked: z.number().int(),
    bounced: z.number().int(),
    complained: z.number().int(),
    unsubscribed: z.number().int(),
    openRate: z.number().describe('opened / sent (0 to 1)'),
    clickRate: z.number().describe('clicked / sent'),
    bounceRate: z.number().describe('bounced / sent'),
  })
  .meta({ id: 'CampaignStats' });

export const campaignSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    subject: z.string(),
    body: z.string(),
    from: z.string(),
    fromName: z.string().nullable(),
    replyTo: z.string().nullable(),
    type: z.enum(['MARKETING', 'TRANSACTIONAL']),
    segmentId: z.string().nullable(),
    status: z.enum(['DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED']),
    scheduledFor: z.string().nullable(),
    startedAt: z.string().nullable().describe('When sending began and the audience was frozen; null before'),
    sentAt: z.string().nullable().describe('When the campaign finished sending (SENT)'),
    cancelledAt: z.string().nullable(),
    totalRecipients: z.number().int().describe('The audience frozen when sending began (an estimate counted at send time before that)'),
    stats: campaignStatsSchema,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Campaign' });

export const campaignListQuery = cursorQuery;

export const audienceQuery = z.object({
  segmentId: fields.segmentId.describe('The segment the campaign would address; absent: every subscribed contact'),
  type: fields.type,
});

export const audienceResponse = z.object({
  segmentId: z.string().nullable(),
  type: z.enum(['MARKETING', 'TRANSACTIONAL']),
  recipients: z
    .number()
    .int()
    .describe('Contacts a campaign with this audience and type would go to if sent now (POST /campaigns/:id/send counts the same way)'),
});

export const testSendResponse = z.object({
  emailId: z.string().describe('The queued test email'),
  email: z.string(),
  status: z.literal('QUEUED'),
});
