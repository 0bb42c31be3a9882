import { z } from 'zod';

export const verifyBody = z.object({
  email: z
    .string()
    .describe('The address to verify. Any string is accepted: a malformed address is a result with valid false, not a 422.'),
});

// No `.meta({ id })`: openapi.ts would emit a `#/$defs/…` reference, which does not resolve
// inside an OpenAPI document; the result is inlined instead.
export const verifyResult = z.object({
  email: z.string().describe('The address as given, without surrounding whitespace'),
  valid: z.boolean().describe('Well-formed, the domain exists and has MX records, and it is not disposable'),
  isDisposable: z.boolean().describe('The domain is a disposable (throwaway) email service'),
  isAlias: z.boolean().describe('A plus-address, or an address at an alias / forwarding service (Hide My Email, Firefox Relay, ...)'),
  isTypo: z.boolean().describe('The domain looks misspelled; see suggestion'),
  isPlusAddressed: z.boolean().describe('The part before the @ has a +tag'),
  isPersonalEmail: z.boolean().describe('At a free webmail provider (gmail.com, yahoo.com, ...)'),
  domainExists: z.boolean().describe('DNS has NS, A, AAAA or MX records for the domain'),
  hasWebsite: z.boolean().describe('The domain or its www. has an A or AAAA record'),
  hasMxRecords: z.boolean().describe('The domain has MX records (a null MX does not count)'),
  reasons: z.array(z.string()).describe('One plain-words line per check that came out negative'),
  suggestion: z.string().nullable().describe('The corrected address when isTypo, else null'),
});

export const verifyResponse = z.object({ success: z.literal(true), data: verifyResult });
