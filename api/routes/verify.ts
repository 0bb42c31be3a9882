import type { DnsLookup } from '../../mail/dns';
import { verifyEmailAddress } from '../../mail/verify-address';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { verifyBody, verifyResponse } from '../schemas/verify';

export function registerVerifyRoutes(api: RouteRegistry, deps: AppDeps & { dns: DnsLookup }): void {
  api.add({
    method: 'post',
    path: '/v1/verify',
    tag: 'Verify',
    summary: 'Verify an email address: format, domain and MX records, disposable and free-provider lists, aliases, typos',
    auth: 'secret',
    body: verifyBody,
    // An address is short; there is no reason to accept the default 1 MB.
    bodyLimit: '16kb',
    response: verifyResponse,
    handler: async ({ body }) => ({ success: true as const, data: await verifyEmailAddress(body.email, { dns: deps.dns }) }),
  });
}
