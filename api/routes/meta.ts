import { z } from 'zod';
import { query } from '../../db/sql';
import type { AppDeps } from '../context';
import { AppError } from '../../errors';
import { DOCS_ASSETS, renderDocsPage, sendDocsAsset } from '../docs-page';
import { buildOpenApi } from '../openapi';
import type { RouteRegistry } from '../routing';

const componentHealth = z.object({ status: z.enum(['ok', 'down']) });

/**
 * Bounds on the dependency checks of /health. Without them a dead Temporal address made
 * GET /health hang ~20 s (the client retries UNAVAILABLE with back-off), and a dead database
 * as long as the pool's acquire timeout: probes time out instead of seeing the 503.
 */
const HEALTH_TIMEOUT_MS = 2000;
const TEMPORAL_DEADLINE_MS = 1500;

/** Resolves false when `check` fails or takes longer than `ms`. */
async function within(ms: number, check: () => Promise<boolean>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([check().catch(() => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

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
      const connection = deps.temporal.client.connection;
      const [dbUp, temporalUp] = await Promise.all([
        within(HEALTH_TIMEOUT_MS, () => query(scope.em, 'select 1').then(() => true)),
        // A gRPC deadline rather than a race: the client's retry interceptor keeps retrying an
        // abandoned call on a timer (and throws "Channel has been shut down" if the connection is
        // closed meanwhile); with a deadline the call itself ends, within ~2x the deadline.
        connection.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () => deps.temporal.healthy()).catch(() => false),
      ]);
      const database = dbUp ? ('ok' as const) : ('down' as const);
      const temporal = temporalUp ? ('ok' as const) : ('down' as const);
      const healthy = database === 'ok' && temporal === 'ok';
      res.status(healthy ? 200 : 503);
      return { status: healthy ? 'ok' : 'degraded', database: { status: database }, temporal: { status: temporal } };
    },
  });

  let cached: Record<string, unknown> | undefined;
  const document = () =>
    (cached ??= buildOpenApi(api.routes, {
      version,
      serverUrl: deps.config.publicUrl,
      rateLimitPerMinute: deps.config.rateLimitPerMinute,
      outbox: deps.config.outbox,
    }));

  api.add({
    method: 'get',
    path: '/openapi.json',
    tag: 'Service',
    summary: 'This API described as OpenAPI 3.1',
    description: 'The document /docs renders, generated from the same schemas that validate requests.',
    auth: 'none',
    response: z.record(z.string(), z.unknown()).describe('An OpenAPI 3.1 document'),
    handler: () => document(),
  });

  api.add({
    method: 'get',
    path: '/docs',
    tag: 'Service',
    summary: 'This reference (HTML: Swagger UI over /openapi.json)',
    auth: 'none',
    raw: true,
    handler: ({ res }) => {
      res.type('html').send(renderDocsPage());
    },
  });

  api.add({
    method: 'get',
    path: '/docs/assets/:file',
    tag: 'Service',
    summary: 'Static files of the reference page (Swagger UI, served from the installed package)',
    description: `One of ${DOCS_ASSETS.map((f) => `\`${f}\``).join(', ')}; anything else is 404. Cacheable for a year: the page links them with the package version in the query string.`,
    auth: 'none',
    params: z.object({ file: z.string().describe('File name') }),
    raw: true,
    handler: async ({ params, res }) => {
      if (!(await sendDocsAsset(res, params.file))) throw new AppError(404, 'NOT_FOUND', `No such file: ${params.file}`);
    },
  });
}
