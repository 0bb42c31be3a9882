import { z } from 'zod';
import { introduction, TAG_DESCRIPTIONS } from './openapi-intro';
import type { AnyRouteSpec, AuthMode, RouteExample } from './routing';
import { SESSION_COOKIE } from './session';
import { errorEnvelope } from './schemas/common';

type JsonSchema = Record<string, unknown>;

/** Texts of route-specific errors (RouteSpec.errors) that several routes share. */
export const ERROR_TEXT = {
  billingLimit:
    "`BILLING_LIMIT_EXCEEDED`: the project's monthly cap for this category of email is reached (or would be passed by this request); nothing was queued. Raise the cap with `PUT /users/@me/projects/{id}/billing-limits` or wait for next month.",
  idempotency:
    '`IDEMPOTENCY_KEY_REUSED`: the `Idempotency-Key` was used in the last 24 h with a different body. `IDEMPOTENCY_KEY_IN_PROGRESS`: the first request with this key was still running after a 5 s wait; retry shortly to get its answer.',
  domainNotVerified:
    "`DOMAIN_NOT_VERIFIED`: the sender's domain is not registered in the project, or (with an SMTP relay) not verified yet. Also `PROJECT_DISABLED`, and the key/session errors of every route.",
  workerUnavailable:
    '`WORKER_UNAVAILABLE`: no worker answered in time; check that the Tidings worker runs, then retry. Also `DATABASE_UNAVAILABLE` (with `Retry-After`) while the database cannot be reached.',
} as const;

interface ErrorExample {
  code: string;
  message: string;
  errors?: Array<{ field: string; message: string; code: string }>;
}

interface CommonError {
  /** Its name in `components.responses`. */
  name: string;
  description: string;
  example: ErrorExample;
  headers?: JsonSchema;
}

/** Errors every route of a kind can answer; which apply to a route is decided in `errorResponses`. */
const commonErrors = (rateLimitPerMinute: number): Record<string, CommonError> => ({
  '400': {
    name: 'BadRequest',
    description: 'Malformed JSON (`VALIDATION_ERROR`) or an unreadable body (`BAD_REQUEST`)',
    example: { code: 'VALIDATION_ERROR', message: 'Malformed JSON in request body' },
  },
  '401': {
    name: 'Unauthorized',
    description: 'No credentials (`MISSING_AUTH`), or a key or session that is not valid (`INVALID_API_KEY`, `INVALID_SESSION`)',
    example: { code: 'MISSING_AUTH', message: 'No API key or session was provided' },
  },
  '403': {
    name: 'Forbidden',
    description:
      'The project is disabled (`PROJECT_DISABLED`, writes only), or the signed-in user is not a member (`PROJECT_ACCESS_DENIED`) or lacks the role (`FORBIDDEN`)',
    example: { code: 'PROJECT_DISABLED', message: 'This project is disabled' },
  },
  '404': {
    name: 'NotFound',
    description: 'Not found (`NOT_FOUND`, or `<RESOURCE>_NOT_FOUND` such as `CONTACT_NOT_FOUND`)',
    example: { code: 'CONTACT_NOT_FOUND', message: 'Contact not found' },
  },
  '413': {
    name: 'PayloadTooLarge',
    description: 'Body too large (`PAYLOAD_TOO_LARGE`)',
    example: { code: 'PAYLOAD_TOO_LARGE', message: 'Request body exceeds the limit of 1048576 bytes' },
  },
  '422': {
    name: 'ValidationFailed',
    description: 'Validation failed (`VALIDATION_ERROR`); `error.errors` lists each field with its message and code',
    example: {
      code: 'VALIDATION_ERROR',
      message: 'Request validation failed: email: Invalid email address',
      errors: [{ field: 'email', message: 'Invalid email address', code: 'invalid_string' }],
    },
  },
  '429': {
    name: 'RateLimited',
    description: 'Rate limit exceeded (`RATE_LIMIT_EXCEEDED`); wait `Retry-After` seconds',
    example: { code: 'RATE_LIMIT_EXCEEDED', message: `Rate limit of ${rateLimitPerMinute} requests per minute exceeded` },
  },
  '503': {
    name: 'DatabaseUnavailable',
    description: 'The database cannot be reached (`DATABASE_UNAVAILABLE`); nothing to fix on your side, retry after `Retry-After` seconds',
    example: { code: 'DATABASE_UNAVAILABLE', message: 'The database is unavailable' },
    headers: { 'Retry-After': ref('headers', 'RetryAfter') },
  },
});

/**
 * A route's own error text names its code first ("`CODE`: what happened. …"); the example is made
 * from that, so the text stays the one place to write.
 */
function exampleFromText(text: string): ErrorExample {
  const match = /^`([A-Z][A-Z_]+)`:\s*([^.]*)/.exec(text);
  if (!match) throw new Error(`Route error texts start with "\`CODE\`: ": ${text}`);
  const message = match[2]!.replaceAll('`', '').trim();
  return { code: match[1]!, message: message.charAt(0).toUpperCase() + message.slice(1) };
}

const SECURITY: Record<AuthMode, JsonSchema[]> = {
  none: [],
  secret: [{ secretKey: [] }, { session: [] }],
  publicOrSecret: [{ secretKey: [] }, { publicKey: [] }, { session: [] }],
  session: [{ session: [] }],
};

const ref = (kind: 'schemas' | 'parameters' | 'headers' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });

const PARAMETERS: Record<string, JsonSchema> = {
  ProjectId: {
    name: 'X-Project-Id',
    in: 'header',
    required: false,
    description: 'Required with a session cookie, ignored with a key: the id (`prj_…`) of the project the request is about.',
    schema: { type: 'string' },
  },
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes a retry safe: within 24 h a repeat with the same key and body replays the first answer (with `Idempotent-Replayed: true`) ' +
      'instead of running again. 1–255 printable ASCII characters without spaces, for example a UUID.',
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[!-~]+$' },
  },
};

const HEADERS: Record<string, JsonSchema> = {
  RateLimitLimit: { description: 'Requests allowed per minute for the project', schema: { type: 'integer' } },
  RateLimitRemaining: { description: 'Requests left in the current minute', schema: { type: 'integer' } },
  RateLimitReset: { description: 'Seconds until the window restarts', schema: { type: 'integer' } },
  RetryAfter: { description: 'Seconds to wait before the next request', schema: { type: 'integer' } },
  IdempotentReplayed: {
    description: '`true` when this answer replays an earlier request with the same `Idempotency-Key`',
    schema: { type: 'string', enum: ['true'] },
  },
};

const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': ref('headers', 'RateLimitLimit'),
  'RateLimit-Remaining': ref('headers', 'RateLimitRemaining'),
  'RateLimit-Reset': ref('headers', 'RateLimitReset'),
};

/**
 * Noise zod adds to what it emits: the regular expression it validates with next to a standard
 * `format` (a 200-character one for `z.email()`), which the format says to a reader anyway, and the
 * ±2^53 bounds of every `.int()`. The server validates either way.
 */
function dropNoise(node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach(dropNoise);
  } else if (node && typeof node === 'object') {
    const schema = node as JsonSchema;
    if (typeof schema.format === 'string') delete schema.pattern;
    if (schema.minimum === Number.MIN_SAFE_INTEGER) delete schema.minimum;
    if (schema.maximum === Number.MAX_SAFE_INTEGER) delete schema.maximum;
    Object.values(schema).forEach(dropNoise);
  }
}

/**
 * Schemas named with `.meta({ id })` come out of zod as `$defs` with `#/$defs/<id>` references;
 * they are moved into `components.schemas`, where OpenAPI resolves them.
 */
function schemaConverter(components: Record<string, JsonSchema>) {
  return (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
    const json = z.toJSONSchema(schema, { io, unrepresentable: 'any', reused: 'inline' }) as JsonSchema;
    const { $schema: _ignored, $defs, ...rest } = JSON.parse(
      JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/'),
    ) as JsonSchema & { $defs?: Record<string, JsonSchema> };
    dropNoise(rest);
    for (const [id, def] of Object.entries($defs ?? {})) {
      dropNoise(def);
      components[id] ??= def;
    }
    return rest;
  };
}

type ToSchema = ReturnType<typeof schemaConverter>;

/** Express `/contacts/:id` → OpenAPI `/contacts/{id}`. */
export const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function parameters(route: AnyRouteSpec, toSchema: ToSchema): JsonSchema[] {
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
  // A session names its project in the header, unless the path does.
  if ((route.auth === 'secret' || route.auth === 'publicOrSecret') && !route.projectParam) out.push(ref('parameters', 'ProjectId'));
  if (route.idempotent) out.push(ref('parameters', 'IdempotencyKey'));
  return out;
}

const mediaExamples = (examples: Record<string, RouteExample> | undefined) =>
  examples ? { examples: Object.fromEntries(Object.entries(examples).map(([name, e]) => [name, { summary: e.summary, value: e.value }])) } : {};

const errorResponse = (status: string, description: string, example: ErrorExample, headers?: JsonSchema): JsonSchema => ({
  description,
  ...(status === '429' ? { headers: { 'Retry-After': ref('headers', 'RetryAfter'), ...RATE_LIMIT_HEADERS } } : headers ? { headers } : {}),
  content: {
    'application/json': {
      schema: ref('schemas', 'Error'),
      example: {
        success: false,
        message: example.message,
        error: { ...example, statusCode: Number(status), requestId: '3f1c2a9e-5d7b-4c1e-9a0f-2b6d8e4c7a15' },
        timestamp: '2026-01-15T10:00:00.000Z',
      },
    },
  },
});

function errorResponses(route: AnyRouteSpec, common: Record<string, CommonError>): Record<string, JsonSchema> {
  const keyed = route.auth !== 'none';
  const out: Record<string, JsonSchema> = {};
  for (const [status, { name }] of Object.entries(common)) {
    // List only the errors the route can produce: 400/413 come from the JSON body parser,
    // 422 from validating a body, query or path, 401/403/429 from the key check, and 503 when
    // the database, which the key check reads, cannot be reached.
    if (!keyed && ['401', '403', '429', '503'].includes(status)) continue;
    if (!route.body && ['400', '413'].includes(status)) continue;
    if (!route.body && !route.query && !route.params && status === '422') continue;
    out[status] = ref('responses', name);
  }
  for (const [status, text] of Object.entries(route.errors ?? {})) out[status] = errorResponse(status, text, exampleFromText(text));
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

function successResponse(route: AnyRouteSpec, toSchema: ToSchema): [string, JsonSchema] {
  // Raw routes write their own reply (a page, a file, a redirect): 200 unless the route says otherwise.
  const status = String(route.status ?? (route.response || route.raw ? 200 : 204));
  const headers = {
    ...(route.auth !== 'none' ? RATE_LIMIT_HEADERS : {}),
    ...(route.idempotent ? { 'Idempotent-Replayed': ref('headers', 'IdempotentReplayed') } : {}),
  };
  const response: JsonSchema = { description: 'Success', ...(Object.keys(headers).length ? { headers } : {}) };
  if (route.response) {
    response.content = {
      'application/json': { schema: toSchema(route.response, 'output'), ...mediaExamples(route.examples?.response) },
    };
  }
  return [status, response];
}

export interface OpenApiSettings {
  version: string;
  /** PUBLIC_URL: the server URL, and the base URL of the examples in the introduction. */
  serverUrl: string;
  rateLimitPerMinute: number;
  outbox: boolean;
}

/** OpenAPI 3.1 generated from the registered routes and the zod schemas that validate them. */
export function buildOpenApi(routes: AnyRouteSpec[], settings: OpenApiSettings): JsonSchema {
  const schemas: Record<string, JsonSchema> = {};
  const toSchema = schemaConverter(schemas);
  const common = commonErrors(settings.rateLimitPerMinute);
  toSchema(errorEnvelope, 'output'); // registers components.schemas.Error, which every error response references
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const tagsInUse: string[] = [];
  for (const route of routes) {
    if (!tagsInUse.includes(route.tag)) tagsInUse.push(route.tag);
    const [successStatus, success] = successResponse(route, toSchema);
    const operation: JsonSchema = {
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      operationId: `${route.method}${route.path.replace(/[/:@.-]+(\w)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase()) || 'Root'}`,
      security: SECURITY[route.auth],
      parameters: parameters(route, toSchema),
      responses: { [successStatus]: success, ...errorResponses(route, common) },
    };
    if (route.body) {
      operation.requestBody = {
        required: true,
        content: { 'application/json': { schema: toSchema(route.body, 'input'), ...mediaExamples(route.examples?.request) } },
      };
    }
    (paths[toOpenApiPath(route.path)] ??= {})[route.method] = operation;
  }
  // Described tags first, in the order of TAG_DESCRIPTIONS (Swagger UI lists them so), then the rest.
  const described = Object.keys(TAG_DESCRIPTIONS).filter((t) => tagsInUse.includes(t));
  const tags = [...described, ...tagsInUse.filter((t) => !described.includes(t))].map((name) =>
    TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name },
  );
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tidings API',
      version: settings.version,
      description: introduction({ publicUrl: settings.serverUrl, rateLimitPerMinute: settings.rateLimitPerMinute, outbox: settings.outbox }),
    },
    servers: [{ url: settings.serverUrl }],
    tags,
    components: {
      securitySchemes: {
        secretKey: { type: 'http', scheme: 'bearer', description: 'Project secret key (`sk_…`): every project endpoint' },
        publicKey: { type: 'http', scheme: 'bearer', description: 'Project public key (`pk_…`): `POST /v1/track` only' },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: SESSION_COOKIE,
          description: 'Dashboard session set by `POST /auth/login`; project routes also need the `X-Project-Id` header',
        },
      },
      parameters: PARAMETERS,
      headers: HEADERS,
      responses: Object.fromEntries(
        Object.entries(common).map(([status, e]) => [e.name, errorResponse(status, e.description, e.example, e.headers)]),
      ),
      schemas,
    },
    paths,
  };
}
