import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { HttpMethod } from './routing';

/** What a client needs to read back: the id to quote to support, replays, and rate limiting. */
const EXPOSED = ['X-Request-Id', 'Idempotent-Replayed', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'].join(',');
const ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key'].join(',');
/** Two hours: the most Chromium keeps a preflight, and long enough to spare a round trip per event. */
const MAX_AGE = '7200';

/**
 * CORS for a route a web page calls straight from the browser with the public key. Any origin
 * may call it, since the public key is meant to sit in page source. The key travels in the
 * Authorization header, never in a cookie, so credentialed requests stay refused (no
 * Access-Control-Allow-Credentials): a page cannot ride on a dashboard session.
 */
export function publicCors(method: HttpMethod): RequestHandler {
  // Headers fixed per route, written as they are: the `cors` package rebuilt them on every request.
  const methods = `${method.toUpperCase()},OPTIONS`;
  return (req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    if (req.method !== 'OPTIONS') {
      res.setHeader('Access-Control-Expose-Headers', EXPOSED);
      next();
      return;
    }
    res.setHeader('Access-Control-Allow-Methods', methods);
    res.setHeader('Access-Control-Allow-Headers', ALLOWED_HEADERS);
    res.setHeader('Access-Control-Max-Age', MAX_AGE);
    res.setHeader('Content-Length', '0');
    res.status(204).end();
  };
}
