import { z } from 'zod';
import type { AnyRouteSpec, AuthMode } from './routing';
import { SESSION_COOKIE } from './session';
import { errorEnvelope } from './schemas/common';

type JsonSchema = Record<string, unknown>;

/**
 * Schemas named with `.meta({ id })` come out of zod as `$defs` with `#/$defs/<id>` references;
 * they are moved into `components.schemas`, where OpenAPI resolves them.
 */
const components: Record<string, JsonSchema> = {};

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
  const json = z.toJSONSchema(schema, { io, unrepresentable: 'any', reused: 'inline' }) as JsonSchema;
  const { $schema: _ignored, $defs, ...rest } = JSON.parse(
    JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/'),
  ) as JsonSchema & { $defs?: Record<string, JsonSchema> };
  for (const [id, def] of Object.entries($defs ?? {})) components[id] ??= def;
  return rest;
};

/** Express `/contacts/:id` → OpenAPI `/contacts/{id}`. */
export const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function parameters(route: AnyRouteSpec): JsonSchema[] {
  const out: JsonSchema[] = [];
  for (const [where, schema] of [
    ['path', route.params],
    ['query', route.query],
  ] as const) {
    if (!schema) continue;
    const json = toSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, prop] of Object.entries(json.properties ?? {})) {
      out.push({
        name,
        in: where,
        required: where === 'path' || (json.required ?? []).includes(name),
        ...(typeof prop.description === 'string' ? { description: prop.description } : {}),
        schema: prop,
      });
    }
  }
  return out;
}

const ERROR_STATUSES: Record<string, string> = {
  '400': 'Malformed request',
  '401': 'Missing or invalid API key',
  '403': 'Forbidden, for example the project is disabled',
  '404': 'Not found',
  '413': 'Body too large',
  '422': 'Validation failed; error.errors lists the fields',
  '429': 'Rate limit exceeded (see Retry-After)',
};

const SECURITY: Record<AuthMode, JsonSchema[]> = {
  none: [],
  secret: [{ secretKey: [] }, { session: [] }],
  publicOrSecret: [{ secretKey: [] }, { publicKey: [] }, { session: [] }],
  session: [{ session: [] }],
};

/** OpenAPI 3.1 generated from the registered routes and the zod schemas that validate them. */
export function buildOpenApi(routes: AnyRouteSpec[], info: { version: string; serverUrl: string }): JsonSchema {
  toSchema(errorEnvelope, 'output'); // registers components.schemas.Error, which every error response references
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const errorRefs = Object.fromEntries(
      Object.entries(ERROR_STATUSES)
        // List only the errors the route can produce: 400/413 come from the JSON body parser,
        // 422 from validating a body, query or path, 401/403/429 from the key check.
        .filter(([status]) => route.auth !== 'none' || !['401', '403', '429'].includes(status))
        .filter(([status]) => route.body || !['400', '413'].includes(status))
        .filter(([status]) => route.body || route.query || route.params || status !== '422')
        .map(([status, description]) => [
          status,
          { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        ]),
    );
    const successStatus = String(route.status ?? (route.response ? 200 : 204));
    const operation: JsonSchema = {
      summary: route.summary,
      tags: [route.tag],
      operationId: `${route.method}${route.path.replace(/[/:@.-]+(\w)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      security: SECURITY[route.auth],
      parameters: parameters(route),
      responses: {
        [successStatus]: route.response
          ? { description: 'Success', content: { 'application/json': { schema: toSchema(route.response, 'output') } } }
          : { description: 'Success' },
        ...errorRefs,
      },
    };
    if (route.body) {
      operation.requestBody = { required: true, content: { 'application/json': { schema: toSchema(route.body, 'input') } } };
    }
    (paths[toOpenApiPath(route.path)] ??= {})[route.method] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tidings API',
      version: info.version,
      description: 'Transactional email, contacts, events, templates, campaigns and workflows.',
    },
    servers: [{ url: info.serverUrl }],
    components: {
      securitySchemes: {
        secretKey: { type: 'http', scheme: 'bearer', description: 'Project secret key (sk_…)' },
        publicKey: { type: 'http', scheme: 'bearer', description: 'Project public key (pk_…), POST /v1/track only' },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: SESSION_COOKIE,
          description: 'Dashboard session set by POST /auth/login; project routes also need the X-Project-Id header',
        },
      },
      schemas: components,
    },
    paths,
  };
}
