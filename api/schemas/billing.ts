import { z } from 'zod';

/** billing_limits.monthly_limit is a Postgres integer. */
const INT_MAX = 2_147_483_647;

const cap = z
  .number()
  .int()
  .min(0)
  .max(INT_MAX)
  .nullable()
  .describe('Emails per calendar month (UTC); 0 stops the category, null means no cap');

/** Strict: a misspelt category is a 422, not a silently ignored cap. */
export const billingLimitsBody = z.strictObject({
  transactional: cap.optional(),
  campaign: cap.optional(),
  workflow: cap.optional(),
});

export const billingLimitsSchema = z.object({ transactional: cap, campaign: cap, workflow: cap });

export const consumptionQuery = z.object({
  month: z.string().optional().describe('YYYY-MM (UTC); the current month when omitted'),
});

const categoryUsage = z.object({
  used: z.number().int().describe('Emails counted in the period (every email written, except the ones the cap refused)'),
  limit: z.number().int().nullable().describe('The current cap; null when uncapped'),
  refused: z.number().int().describe('Emails the cap refused in the period (written FAILED with error BILLING_LIMIT_EXCEEDED)'),
});

export const consumptionSchema = z.object({
  period: z.object({ start: z.string(), end: z.string().describe('Exclusive: the first instant of the next month') }),
  categories: z.object({ transactional: categoryUsage, campaign: categoryUsage, workflow: categoryUsage }),
  total: z.number().int(),
});

const httpUrl = z.url({ protocol: /^https?$/ });

export const checkoutBody = z.object({
  successUrl: httpUrl.optional().describe('Where the provider sends the payer after paying; PUBLIC_URL?billing=success by default'),
  cancelUrl: httpUrl.optional().describe('Where the provider sends the payer on cancel; PUBLIC_URL?billing=cancelled by default'),
});

export const portalBody = z.object({
  returnUrl: httpUrl.optional().describe('Where the portal links back to; PUBLIC_URL by default'),
});

export const sessionUrlSchema = z.object({ url: z.string() });

export const invoiceSchema = z.object({
  id: z.string(),
  number: z.string().nullable(),
  status: z.string().nullable(),
  amountDue: z.number().int().describe("In the currency's smallest unit"),
  amountPaid: z.number().int(),
  currency: z.string(),
  created: z.string(),
  hostedInvoiceUrl: z.string().nullable(),
  pdf: z.string().nullable(),
});

export const invoicesSchema = z.object({ data: z.array(invoiceSchema) });

export const webhookAck = z.object({ received: z.literal(true), applied: z.boolean() });
