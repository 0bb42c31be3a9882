import type { z } from 'zod';
import { type FieldError, validationError } from '../errors';

// Zod 4 calls a malformed string "invalid_format"; the API's item code is "invalid_string" (the
// OpenAPI description's Errors section, api/openapi-intro.ts).
const CODE_ALIASES: Record<string, string> = { invalid_format: 'invalid_string' };

export function toFieldErrors(error: z.ZodError, prefix?: string): FieldError[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || (prefix ?? 'body'),
    message: issue.message,
    // A refinement names its own code in params (e.g. template_syntax); zod would only say "custom".
    code: (issue.code === 'custom' && typeof issue.params?.code === 'string' ? issue.params.code : undefined) ?? CODE_ALIASES[issue.code] ?? issue.code,
  }));
}

export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, prefix: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(toFieldErrors(result.error, prefix === 'body' ? undefined : prefix));
  return result.data;
}
