import type { RequestHandler } from 'express';
import type { Clock } from '../../db/clock';
import { Coalescer } from '../../db/coalescer';
import type { Orm } from '../../db/orm';
import { countHits, type RateLimitState } from '../../db/projects/rate-limit';
import { AppError } from '../../errors';
import { scopeOf } from '../routing';

/** Places a bucket's window has taken and not yet handed to requests: `next` up to `last`. */
interface Held {
  window: number;
  next: number;
  last: number;
}

const minuteOf = (t: Date) => Math.floor(t.getTime() / 60_000) * 60_000;

/**
 * Each request's place in its bucket's one-minute window (a project, or a signed-in user outside
 * any), counted in PostgreSQL so every API process shares one count, and not with a statement per
 * request: a process takes a block of places at once and hands them to its requests in turn. A block
 * is a sixteenth of what the window had left when the process last counted in it, or just the
 * requests waiting when that is fewer; so near the limit every request is counted as it comes, no
 * two requests anywhere get the same place, and none past the limit is let through.
 */
export class RateLimiter {
  private readonly held = new Map<string, Held>();
  private readonly takes: Coalescer<string, RateLimitState>;

  constructor(
    orm: Orm,
    readonly limitPerMinute: number,
    private readonly clock: Clock,
  ) {
    const em = orm.em.fork();
    this.takes = new Coalescer(async (buckets) => {
      const now = this.clock();
      const window = minuteOf(now);
      const answers: (RateLimitState | undefined)[] = buckets.map((b) => this.fromHeld(b, now));
      const waiting = new Map<string, number>();
      buckets.forEach((b, i) => answers[i] || waiting.set(b, (waiting.get(b) ?? 0) + 1));
      if (waiting.size > 0) {
        const blocks = [...waiting].map(([bucket, n]) => ({ bucket, n: Math.max(n, this.blockSize(bucket, window)) }));
        const counted = await countHits(em, blocks, now);
        blocks.forEach((b, k) => this.held.set(b.bucket, { window, next: counted[k]!.count - b.n + 1, last: counted[k]!.count }));
      }
      return buckets.map((b, i) => answers[i] ?? this.fromHeld(b, now)!);
    });
  }

  /** The request's place, and how long until its window ends. */
  place(bucket: string): RateLimitState | Promise<RateLimitState> {
    return this.fromHeld(bucket, this.clock()) ?? this.takes.run(bucket);
  }

  private fromHeld(bucket: string, now: Date): RateLimitState | undefined {
    const held = this.held.get(bucket);
    if (!held || held.window !== minuteOf(now) || held.next > held.last) return undefined;
    return { count: held.next++, resetSeconds: Math.max(1, Math.ceil((held.window + 60_000 - now.getTime()) / 1000)) };
  }

  private blockSize(bucket: string, window: number): number {
    const held = this.held.get(bucket);
    const counted = held?.window === window ? held.last : 0;
    return Math.floor((this.limitPerMinute - counted) / 16);
  }
}

/** Per-project (or per-user) request limit shared by every API process. */
export function rateLimit(limiter: RateLimiter): RequestHandler {
  const { limitPerMinute } = limiter;
  return async (_req, res, next) => {
    try {
      const scope = scopeOf(res);
      // Per project; a signed-in user outside any project is counted on their own.
      const { count, resetSeconds } = await limiter.place(scope.auth?.project.id ?? `user:${scope.user!.id}`);
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
