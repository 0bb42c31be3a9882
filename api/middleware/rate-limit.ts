import type { RequestHandler } from 'express';
import type { Clock } from '../../db/clock';
import { hitRateLimit } from '../../db/projects/rate-limit';
import { AppError } from '../../errors';
import { scopeOf } from '../routing';

/** Per-project (or per-user) request limit shared by every API process (the counter lives in Postgres). */
export function rateLimit(limitPerMinute: number, clock: Clock): RequestHandler {
  return async (_req, res, next) => {
    try {
      const scope = scopeOf(res);
      // Per project; a signed-in user outside any project is counted on their own.
      const bucket = scope.auth?.project.id ?? `user:${scope.user!.id}`;
      const { count, resetSeconds } = scope.rateLimit ?? (await hitRateLimit(scope.em, bucket, clock()));
      res.setHeader('RateLimit-Limit', String(limitPerMinute));
      res.setHeader('RateLimit-Remaining', String(Math.max(0, limitPerMinute - count)));
      res.setHeader('RateLimit-Reset', String(resetSeconds));
      if (count > limitPerMinute) {
        throw new AppError(429, 'RATE_LIMIT_EXCEEDED', `Rate limit of ${limitPerMinute} requests per minute exceeded`, {
          suggestion: `Wait ${resetSeconds} seconds before sending more requests.`,
          headers: { 'Retry-After': String(resetSeconds) },
        });
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}
