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

/** What a client is told to wait before retrying while the database cannot be reached. */
const DATABASE_RETRY_AFTER_SECONDS = 5;

/** Any SQLSTATE; class 08 (connection exception), and 57P01–57P03: the server shut down, crashed or is starting. */
const SQLSTATE = /^[0-9A-Z]{5}$/;
/** Connection exceptions, the server shutting down, and too many connections (53300: the server is full, not our bug). */
const CONNECTION_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[123]|53300)$/;

/** Socket failures, as Node reports them on a connection to the database. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * pg's and knex's messages for a lost or unobtainable connection, which carry no code. The last
 * is knex's answer when the connection died under BEGIN: it still hands out the transaction,
 * already rolled back, and drops the original error.
 */
const CONNECTION_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Client has encountered a connection error and is not queryable',
  'Knex: Timeout acquiring a connection. The pool is probably full. Are you missing a .transacting(trx) call?',
  'Transaction query already complete, run with DEBUG=knex:tx for more info',
]);

/**
 * A failure to reach PostgreSQL, raw from pg/knex (db/sql.ts) or wrapped by MikroORM (its
 * DriverException copies the driver error's code, syscall and message).
 */
function isDatabaseUnreachable(err: unknown): boolean {
  // Not `instanceof Error`: a socket error comes from Node's own realm, which need not be ours (a VM
  // context, jest's sandbox), and it reaches here unwrapped when the first query is raw SQL.
  if (typeof err !== 'object' || err === null) return false;
  const { code, syscall, message } = err as { code?: unknown; syscall?: unknown; message?: unknown };
  // Only system errors (with `syscall`): a DNS lookup error reuses ECONNREFUSED for its DNS server.
  if (typeof code === 'string' && typeof syscall === 'string') return SOCKET_CODES.has(code);
  // An error from the server: its SQLSTATE alone decides, as its message and detail may quote user data.
  if (typeof code === 'string' && SQLSTATE.test(code)) return CONNECTION_SQLSTATE.test(code);
  // knex puts the statement, with its values, in front of a query's error: "<sql> - <message>".
  return typeof message === 'string' && CONNECTION_MESSAGES.has(message.split(' - ').pop()!);
}

const databaseUnavailable = () =>
  new AppError(503, 'DATABASE_UNAVAILABLE', 'The database is unavailable', {
    suggestion: 'Retry after Retry-After seconds; where the route takes an Idempotency-Key, send the same one so a write that did go through is not repeated.',
    headers: { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) },
  });

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
  if (isDatabaseUnreachable(err)) {
    req.log.warn({ err }, 'database unavailable');
    sendError(req, res, databaseUnavailable());
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
