import { z } from 'zod';
import { query } from '../../db/sql';
import type { AppDeps } from '../context';
import { renderDocsPage } from '../docs-page';
import { buildOpenApi } from '../openapi';
import type { RouteRegistry } from '../routing';

const componentHealth = z.object({ status: z.enum(['ok', 'down']) });

/** Health and self-description. Registered last so the document covers every route. */
export function registerMetaRoutes(api: RouteRegistry, deps: AppDeps, version: string): void {
  api.add({
    method: 'get',
    path: '/health',
    tag: 'Service',
    summary: 'Database and Temporal connectivity (503 when either is down)',
    auth: 'none',
    response: z.object({ status: z.enum(['ok', 'degraded']), database: componentHealth, temporal: componentHealth }),
    handler: async ({ scope, res }) => {
      const database = await query(scope.em, 'select 1').then(
        () => 'ok' as const,
        () => 'down' as const,
      );
      const temporal = (await deps.temporal.healthy()) ? ('ok' as const) : ('down' as const);
      const healthy = database === 'ok' && temporal === 'ok';
      res.status(healthy ? 200 : 503);
      return { status: healthy ? 'ok' : 'degraded', database: { status: database }, temporal: { status: temporal } };
    },
  });

  let cached: Record<string, unknown> | undefined;
  const document = () => (cached ??= buildOpenApi(api.routes, { version, serverUrl: deps.config.publicUrl }));

  api.add({
    method: 'get',
    path: '/openapi.json',
    tag: 'Service',
    summary: 'This API described as OpenAPI 3.1',
    auth: 'none',
    handler: () => document(),
  });

  api.add({
    method: 'get',
    path: '/docs',
    tag: 'Service',
    summary: 'Human-readable API reference',
    auth: 'none',
    raw: true,
    handler: ({ res }) => {
      res.type('html').send(renderDocsPage(document()));
    },
  });
}
