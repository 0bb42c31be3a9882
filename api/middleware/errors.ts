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
function fromBodyParser(err: { type?: string; limit?: number; status?: number; expose?: boolean }): AppError | undefined {
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
  // Other client-side body failures (corrupt gzip body, Content-Length not matching the body,
  // aborted upload…) are the client's doing: 400, not a 500 that reads like a server fault.
  // body-parser marks them with a 4xx status and expose: true (http-errors).
  if (err.expose === true && typeof err.status === 'number' && err.status >= 400 && err.status < 500) {
    return new AppError(400, 'BAD_REQUEST', 'The request body could not be read', {
      suggestion: 'Check that Content-Length matches the body and that the upload completes.',
    });
  }
  return undefined;
}

/** The router could not decode a path parameter (a `%` not followed by valid UTF-8 percent-encoding). */
function fromRouter(err: unknown): AppError | undefined {
  if (err instanceof URIError && (err as URIError & { status?: number }).status === 400) {
    return new AppError(400, 'BAD_REQUEST', 'The URL path is not valid percent-encoding', {
      suggestion: 'Encode path segments with encodeURIComponent.',
    });
  }
  return undefined;
}

export const errorHandler: ErrorRequestHandler = (err, req, res, next) => {
  // Part of a response is already out (a streamed page): an envelope can no longer be sent,
  // so let Express close the connection.
  if (res.headersSent) {
    next(err);
    return;
  }
  const known = err instanceof AppError ? err : (fromRouter(err) ?? fromBodyParser(err as { type?: string; status?: number; expose?: boolean }));
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
