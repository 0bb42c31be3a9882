import { verifyEmailAddress } from '../../mail/verify-address';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { verifyBody, verifyResponse } from '../schemas/verify';

/** POST /v1/verify: a public-API envelope around mail/verify-address, DNS through `deps.dns`. */
export function registerVerifyRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/v1/verify',
    tag: 'Public API',
    summary:
      'Verify an email address: format, domain and MX records, website, disposable and free-provider lists, aliases, plus-addressing, typos',
    auth: 'secret',
    body: verifyBody,
    // An address is short; no reason to take the default 1 MB.
    bodyLimit: '16kb',
    response: verifyResponse,
    handler: async ({ body }) => ({ success: true as const, data: await verifyEmailAddress(body.email, { dns: deps.dns }) }),
  });
}
