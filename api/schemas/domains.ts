import { z } from 'zod';

const HOSTNAME = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;

export const addDomainBody = z.object({
  domain: z
    .string()
    .trim()
    .toLowerCase()
    .regex(HOSTNAME, 'Must be a domain name such as mail.example.com')
    .refine((d) => !/^\d+(\.\d+)+$/.test(d), 'Must be a domain name, not an IP address'),
});

const recordState = z.enum(['ok', 'missing', 'mismatch', 'unreachable']);

export const domainSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    domain: z.string(),
    status: z.enum(['pending', 'verified']),
    records: z.array(
      z.object({
        type: z.enum(['TXT', 'MX', 'CNAME']),
        name: z.string(),
        value: z.string(),
        purpose: z.enum(['dkim', 'spf', 'dmarc', 'return-path']),
      }),
    ),
    lastCheck: z
      .object({
        verified: z.boolean(),
        conclusive: z.boolean(),
        records: z.object({ dkim: recordState, spf: recordState, dmarc: recordState }),
      })
      .nullable(),
    lastCheckedAt: z.string().nullable(),
    verifiedAt: z.string().nullable(),
    createdAt: z.string(),
    sending: z
      .object({ allowed: z.boolean(), reason: z.string() })
      .describe('Whether mail can be sent from this domain now: verified, or any registered domain in outbox mode (no SMTP_URL)'),
  })
  .meta({ id: 'Domain' });

export const projectIdParams = z.object({ projectId: z.string().min(1) });
