import cors from 'cors';
import type { RequestHandler } from 'express';
import type { HttpMethod } from './routing';

/**
 * CORS for a route a web page calls straight from the browser with the public key. Any origin
 * may call it, since the public key is meant to sit in page source. The key travels in the
 * Authorization header, never in a cookie, so credentialed requests stay refused (no
 * Access-Control-Allow-Credentials): a page cannot ride on a dashboard session.
 */
export function publicCors(method: HttpMethod): RequestHandler {
  return cors({
    origin: '*',
    methods: [method.toUpperCase(), 'OPTIONS'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key'],
    // What a client needs to read back: the id to quote to support, replays, and rate limiting.
    exposedHeaders: ['X-Request-Id', 'Idempotent-Replayed', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
    // Two hours: the most Chromium keeps a preflight, and long enough to spare a round trip per event.
    maxAge: 7200,
  });
}
