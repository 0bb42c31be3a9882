import { z } from 'zod';
import { DEFAULT_METRICS, INTERVALS, MAX_BUCKETS, METRICS, TOP_CAMPAIGN_METRICS, type Metric } from '../../db/insights/analytics';
import { checkRange, rangeShape } from './feed';

/** An IANA zone name the runtime knows (Europe/Paris, America/New_York, UTC). */
const timezoneParam = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .refine(
    (tz) => {
      try {
        new Intl.DateTimeFormat('en-US', { timeZone: tz });
        return true;
      } catch {
        return false;
      }
    },
    { message: 'Unknown time zone; use an IANA name such as Europe/Paris or UTC' },
  );

const metricsParam = z
  .string()
  .trim()
  .transform((raw, ctx): Metric[] => {
    const parts = [...new Set(raw.split(',').map((p) => p.trim()))];
    if (parts.includes('all')) return [...METRICS];
    const bad = parts.filter((p) => !(METRICS as readonly string[]).includes(p));
    if (bad.length || !parts.length) {
      ctx.addIssue({ code: 'custom', message: `Expected all, or one or more of ${METRICS.join(', ')}, comma-separated` });
      return z.NEVER;
    }
    return METRICS.filter((m) => parts.includes(m));
  });

export const timeseriesQuery = z
  .object({
    metric: metricsParam
      .optional()
      .describe(
        `Which counts each bucket carries: one of ${METRICS.join(', ')}, several comma-separated, or all. ` +
          `Default: ${DEFAULT_METRICS.join(',')}`,
      ),
    interval: z.enum(INTERVALS).default('day').describe('Bucket size (default day)'),
    from: rangeShape.from.describe(
      `Start, inclusive: ISO date-time with offset, or a date (midnight in \`timezone\`). Default: 30 days (day), 24 hours (hour), ` +
        `12 weeks or 12 months before the end, at a bucket start. At most ${MAX_BUCKETS} buckets.`,
    ),
    to: rangeShape.to.describe('End, exclusive: ISO date-time with offset, or a date (midnight in `timezone`). Default: now'),
    timezone: timezoneParam
      .default('UTC')
      .describe('IANA zone the buckets (and date-only from/to) follow, default UTC'),
    campaignId: z.string().min(1).optional().describe('Only emails of this campaign'),
  });
// No range check here: a date-only bound means midnight in `timezone`, known once resolved (db/insights/analytics.ts checks).

const count = z.number().int();

export const timeseriesResponse = z.object({
  interval: z.enum(INTERVALS),
  timezone: z.string(),
  from: z.string().describe('Start of the range (inclusive)'),
  to: z.string().describe('End of the range (exclusive)'),
  series: z
    .array(
      z.object({
        bucket: z.string().describe('Start of the bucket: midnight (day), the hour, Monday (week) or the 1st (month) in `timezone`'),
        sends: count.optional().describe('Emails sent (accepted by the relay) in the bucket'),
        deliveries: count.optional().describe('Emails the receiving server reported delivered in the bucket'),
        opens: count.optional().describe('Emails first opened in the bucket'),
        clicks: count.optional().describe('Emails first clicked in the bucket'),
        bounces: count.optional().describe('Emails that bounced in the bucket (refused by the relay, or bounced back later)'),
        complaints: count.optional().describe('Emails marked as spam in the bucket'),
      }),
    )
    .describe('Every bucket from the one holding `from` to the one holding the end, oldest first, empty ones as 0; only the requested metrics'),
  totals: z
    .object({
      sends: count.optional(),
      deliveries: count.optional(),
      opens: count.optional(),
      clicks: count.optional(),
      bounces: count.optional(),
      complaints: count.optional(),
    })
    .describe('Sums over the range'),
});

export const campaignStatsSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    status: z.string(),
    sentAt: z.string().nullable(),
    totalRecipients: count,
    sent: count.describe('Emails accepted by the relay'),
    delivered: count,
    opened: count.describe('Emails opened at least once (a click counts as an open)'),
    clicked: count.describe('Emails with at least one click'),
    bounced: count,
    complained: count,
    unsubscribed: count.describe('Recipients unsubscribed now whose unsubscription came after this campaign\'s email'),
    openRate: z.number().describe('opened / sent, a fraction with four decimals (0.25 = 25 %); 0 when nothing was sent'),
    clickRate: z.number().describe('clicked / sent, a fraction'),
    bounceRate: z.number().describe('bounced / sent, a fraction'),
  })
  .meta({ id: 'CampaignStats' });

export const topCampaignsQuery = z
  .object({
    metric: z.enum(TOP_CAMPAIGN_METRICS).default('opens').describe('Rank by emails sent, opened, or clicked (default opens)'),
    limit: z.coerce.number().int().min(1).max(100).default(10).describe('How many campaigns (default 10, at most 100)'),
    from: rangeShape.from.describe('Only campaigns sent at or after this instant (ISO date-time with offset, or a date: midnight UTC)'),
    to: rangeShape.to.describe('Only campaigns sent before this instant'),
  })
  .superRefine((v, ctx) => checkRange(v, ctx));

export const topCampaignsResponse = z.object({
  metric: z.enum(TOP_CAMPAIGN_METRICS),
  campaigns: z.array(campaignStatsSchema).describe('Campaigns that sent at least one email, highest first (ties: sent later first)'),
});

export const campaignStatsQuery = z.object({
  campaignId: z.string().min(1).optional().describe('One campaign (404 when it is not in the project); omitted, the newest campaigns'),
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('Without campaignId: how many campaigns, newest first (default 20, at most 100)'),
});

export const campaignStatsResponse = z.object({ campaigns: z.array(campaignStatsSchema) });

export const topEventsQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(10).describe('How many names (default 10, at most 100)'),
    ...rangeShape,
    kind: z
      .enum(['all', 'tracked', 'emitted'])
      .default('all')
      .describe('tracked: names clients tracked; emitted: email.*, contact.*, segment.* the service records; all (default)'),
  })
  .superRefine((v, ctx) => checkRange(v, ctx));

export const topEventsResponse = z.object({
  events: z.array(z.object({ name: z.string(), count: count })).describe('Most frequent first (ties by name)'),
});
