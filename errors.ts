/**
 * The product's error contract: the envelope the OpenAPI description's Errors section shows
 * (api/openapi-intro.ts), with a code and status per error.
 * Domain code in db/ and temporal/ throws these; the API maps them to the envelope.
 */
export interface FieldError {
  field: string;
  message: string;
  code: string;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: { suggestion?: string; errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const notFound = (resource: string, code = `${resource.toUpperCase().replace(/\s+/g, '_')}_NOT_FOUND`) =>
  new AppError(404, code, `${resource[0]!.toUpperCase()}${resource.slice(1)} not found`, {
    suggestion: `Check the ${resource} id, and that it belongs to the project of your API key.`,
  });

export const conflict = (message: string, suggestion?: string, code = 'CONFLICT') =>
  new AppError(409, code, message, { suggestion });

/** The message names the fields too: clients that show only `message` still say what to fix. */
export const validationError = (
  errors: FieldError[],
  message = `Request validation failed: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`.slice(0, 1000),
) =>
  new AppError(422, 'VALIDATION_ERROR', message, {
    errors,
    suggestion: 'Fix the fields listed in error.errors and send the request again.',
  });
