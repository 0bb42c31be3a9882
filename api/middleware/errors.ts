import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { AppError, type FieldError } from '../../errors';

interface Envelope {
  success: false;
  /** Copy of error.message: the official Node client reads only this one. */
  message: string;
  error: {
    code: string;
    message: string;
    statusCode: number;
    requestId: string;
    errors?: FieldError[];
    suggestion?: string;
  };
  timestamp: string;
}

export function sendError(req: Request, res: Response, err: AppError): void {
  const body: Envelope = {
    success: false,
    message: err.message,
    error: {
      code: err.code,
      message: err.message,
      statusCode: err.status,
      requestId: String(req.id),
      ...(err.extra.errors ? { errors: err.extra.errors } : {}),
      ...(err.extra.suggestion ? { suggestion: err.extra.suggestion } : {}),
    },
    timestamp: new Date().toISOString(),
  };
  for (const [name, value] of Object.entries(err.extra.headers ?? {})) res.setHeader(name, value);
  res.status(err.status).json(body);
}

/** body-parser reports its failures with a `type`; map them to the contract's codes. */
function fromBodyParser(err: { type?: string; limit?: number }): AppError | undefined {
  if (err.type === 'entity.parse.failed') {
    return new AppError(400, 'VALIDATION_ERROR', 'Malformed JSON in request body', {
      suggestion: 'Send a valid JSON document with Content-Type: application/json.',
    });
  }
  if (err.type === 'entity.too.large') {
    return new AppError(413, 'PAYLOAD_TOO_LARGE', `Request body exceeds the limit of ${err.limit} bytes`, {
      suggestion: 'Send a smaller body.',
    });
  }
  if (err.type === 'encoding.unsupported' || err.type === 'charset.unsupported') {
    return new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported request encoding', {
      suggestion: 'Send UTF-8 JSON.',
    });
  }
  return undefined;
}

export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  const known = err instanceof AppError ? err : fromBodyParser(err as { type?: string });
  if (known) {
    sendError(req, res, known);
    return;
  }
  req.log.error({ err }, 'unhandled error');
  sendError(
    req,
    res,
    new AppError(500, 'INTERNAL_SERVER_ERROR', 'An unexpected error occurred', {
      suggestion: 'Try again; if it persists, contact support with the requestId.',
    }),
  );
};

export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(
    new AppError(404, 'NOT_FOUND', `No route for ${req.method} ${req.path}`, {
      suggestion: 'Check the method and path against GET /openapi.json.',
    }),
  );
};
