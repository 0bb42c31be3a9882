import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger as SdkLogger, LogLevel as SdkLogLevel, LogMetadata } from '@temporalio/common';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config';

const CENSOR = '[REDACTED]';

/**
 * Fields that carry credentials wherever they appear in a logged object: the request headers of
 * keyed and session requests, the session cookie being set, and passwords or tokens a caller
 * might put in a log object by name.
 */
const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'req.headers["stripe-signature"]',
  'res.headers["set-cookie"]',
  'password',
  '*.password',
  'token',
  '*.token',
  'secretKey',
  '*.secretKey',
  'publicKey',
  '*.publicKey',
];

/**
 * Our own pages whose path segment is the credential: contact subscription links and tracking
 * links carry a signed token there (mail/links.ts, mail/tracking.ts).
 */
const TOKEN_IN_PATH = /(\/(?:unsubscribe|subscribe|manage|t\/o|t\/c)\/)[^/?#\s"\\]+/g;

/**
 * Last line of defence on every written line, whatever put the value there (an error message, a
 * link in free text): project keys, JWTs (the session cookie's value) and our link pages' tokens.
 * Query strings in free text are left alone: the SNS SubscribeURL is logged for the operator to open.
 */
const SECRET_PATTERNS: [RegExp, string][] = [
  [/\b[sp]k_[A-Za-z0-9]{16,}/g, CENSOR],
  [/\beyJ[\w-]+\.[\w-]+\.[\w-]+/g, CENSOR],
  [TOKEN_IN_PATH, `$1${CENSOR}`],
];

function scrubSecrets(line: string): string {
  let out = line;
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/**
 * A URL as it may be logged: every query value replaced (parameter names stay, to show which were
 * given) and the token of a link page. Reset, verification and OAuth links carry their secret in
 * the query; which other parameters are harmless is not worth deciding per route.
 */
function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const path = (q < 0 ? url : url.slice(0, q)).replace(TOKEN_IN_PATH, `$1${CENSOR}`);
  if (q < 0) return path;
  const params = url
    .slice(q + 1)
    .split('&')
    .map((pair) => (pair.includes('=') ? `${pair.slice(0, pair.indexOf('='))}=${CENSOR}` : pair));
  return `${path}?${params.join('&')}`;
}

type LoggedRequest = IncomingMessage & { id?: unknown; originalUrl?: string };

/**
 * What pino-http logs of a request and its response. pino-std-serializers' own also logs
 * `query` and `params` (the token again) and the full URL, so these replace them; headers stay
 * for debugging, their credentials are removed by the logger's redact paths.
 */
export const httpLogSerializers = {
  req(req: LoggedRequest) {
    return {
      id: req.id,
      method: req.method,
      url: redactUrl(req.originalUrl ?? req.url ?? ''),
      headers: req.headers,
      remoteAddress: req.socket?.remoteAddress,
      remotePort: req.socket?.remotePort,
    };
  },
  res(res: ServerResponse) {
    const headers = res.getHeaders();
    const location = headers.location;
    return {
      statusCode: res.statusCode,
      // A redirect may point at a provider with our OAuth state, or at a clicked link's target.
      headers: typeof location === 'string' ? { ...headers, location: redactUrl(location) } : headers,
    };
  },
};

/** The service's one logger (API requests, worker, Temporal SDK): JSON lines with credentials removed. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  const options = {
    level: config.logLevel,
    redact: { paths: REDACT_PATHS, censor: CENSOR },
    hooks: { streamWrite: scrubSecrets },
  };
  return destination ? pino(options, destination) : pino(options);
}

const SDK_SEVERITY: Record<SdkLogLevel, number> = { TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, ERROR: 4 };
const PINO_LEVEL = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;

/**
 * The Temporal SDK's logger interface over pino, so the worker's, the activities' and (forwarded)
 * the Rust core's messages are JSON lines like the API's. Messages below `threshold` are dropped:
 * the SDK logs every workflow bundle build and worker state change at INFO.
 */
export class TemporalSdkLogger implements SdkLogger {
  private readonly logger: Logger;

  constructor(
    logger: Logger,
    private readonly threshold: SdkLogLevel = 'WARN',
  ) {
    this.logger = logger.child({ component: 'temporal' });
  }

  log(level: SdkLogLevel, message: string, meta: LogMetadata = {}): void {
    if (SDK_SEVERITY[level] < SDK_SEVERITY[this.threshold]) return;
    // pino serializes an Error only under `err`; the SDK passes it as `error`.
    const { error, ...rest } = meta as { error?: unknown };
    this.logger[PINO_LEVEL[level]](error === undefined ? rest : { ...rest, err: error }, message);
  }

  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }

  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }

  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }

  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }

  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}
