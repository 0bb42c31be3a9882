import { verifyEmailAddress } from '../../mail/verify-address';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { verifyBody, verifyResponse } from '../schemas/verify';
import { verifyExamples } from '../schemas/public-examples';

/** POST /v1/verify: a public-API envelope around mail/verify-address, DNS through `deps.dns`. */
export function registerVerifyRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/v1/verify',
    tag: 'Public API',
    summary:
      'Verify an email address: format, domain and MX records, website, disposable and free-provider lists, aliases, plus-addressing, typos',
    description: `Checks an address without sending anything: its syntax, that the domain exists and has MX
records (DNS through the server's resolvers), whether it is a disposable, free-provider or alias
address, plus-addressed, or a likely typo (with a suggestion). \`valid\` is true for a well-formed
address at an existing, mail-receiving, non-disposable domain. A malformed address is an answer with
\`valid: false\` and its \`reasons\`, never a 422. Nothing is stored.`,
    examples: verifyExamples,
    auth: 'secret',
    body: verifyBody,
    // An address is short; no reason to take the default 1 MB.
    bodyLimit: '16kb',
    response: verifyResponse,
    handler: async ({ body }) => ({ success: true as const, data: await verifyEmailAddress(body.email, { dns: deps.dns }) }),
  });
}
