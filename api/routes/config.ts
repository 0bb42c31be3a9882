import { z } from 'zod';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';

const configResponse = z.object({
  environment: z.enum(['development', 'production', 'test']),
  urls: z.object({ api: z.string(), dashboard: z.string() }),
  features: z.object({
    billing: z.object({ enabled: z.boolean() }),
    storage: z.object({ objectStorage: z.boolean() }),
    authProviders: z.object({ github: z.boolean(), google: z.boolean() }),
    smtp: z.object({ enabled: z.boolean() }),
    signups: z.object({ enabled: z.boolean() }),
  }),
});

/**
 * GET /config, without authentication: what this deployment offers, read from its configuration.
 * OAuth sign-in has no implementation yet, so no provider is ever on.
 */
export function registerConfigRoutes(api: RouteRegistry, deps: AppDeps): void {
  const { config } = deps;
  api.add({
    method: 'get',
    path: '/config',
    tag: 'Service',
    summary: 'Public configuration and feature flags (no authentication)',
    auth: 'none',
    response: configResponse,
    handler: () => ({
      environment: config.nodeEnv,
      urls: { api: config.publicUrl, dashboard: config.publicUrl },
      features: {
        billing: { enabled: config.stripe !== undefined },
        storage: { objectStorage: config.s3 !== undefined },
        authProviders: { github: deps.oauth.github !== undefined, google: deps.oauth.google !== undefined },
        smtp: { enabled: config.smtpUrl !== undefined },
        signups: { enabled: !config.disableSignups },
      },
    }),
  });
}
