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
    records: z
      .array(
      z.object({
        type: z.enum(['TXT', 'MX', 'CNAME']),
        name: z.string(),
        value: z.string(),
        purpose: z.enum(['dkim', 'spf', 'dmarc', 'return-path']),
      }),
    )
      .describe(
        'The DNS records to publish. `dkim` decides verification; `spf` and `dmarc` help delivery. The two `return-path` records ' +
          '(an MX naming the inbound SMTP receiver and SPF on `bounces.<domain>`) let each email go from its own bounce address, ' +
          "so bounces and complaints come back to the service; until they check out the domain sends from the From address as before",
      ),
    lastCheck: z
      .object({
        verified: z.boolean(),
        conclusive: z.boolean(),
        returnPath: z
          .object({ ready: z.boolean(), conclusive: z.boolean() })
          .optional()
          .describe('Whether the return-path MX and SPF records are published (absent in checks from before they were looked at)'),
        records: z.object({
          dkim: recordState,
          spf: recordState,
          dmarc: recordState,
          returnPathMx: recordState.optional(),
          returnPathSpf: recordState.optional(),
        }),
      })
      .nullable(),
    lastCheckedAt: z.string().nullable(),
    verifiedAt: z.string().nullable(),
    returnPathVerifiedAt: z
      .string()
      .nullable()
      .describe(
        "Since when the domain's emails go from their own bounce addresses (`bounce+<email id>.<signature>@bounces.<domain>`), " +
          'which map DSNs back to the email; null while the return-path records are not published, and its emails go from the From address',
      ),
    createdAt: z.string(),
    sending: z
      .object({ allowed: z.boolean(), reason: z.string() })
      .describe('Whether mail can be sent from this domain now: verified, or any registered domain in outbox mode (no SMTP_URL)'),
  })
  .meta({ id: 'Domain' });

export const projectIdParams = z.object({ projectId: z.string().min(1) });
