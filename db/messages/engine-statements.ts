import type { EntityManager } from '@mikro-orm/postgresql';
import { Coalescer } from '../coalescer';
import { type Claim, claimDueEmails, markEmailsSent, type SentMark } from './delivery-queue';

export interface ClaimRequest {
  queue: string;
  limit: number;
  leaseSeconds: number;
  which: 'queued' | 'expired';
}

/**
 * The claims and SENT marks of every delivery-engine round in one worker process, in shared
 * statements (db/coalescer.ts). Each engine (DELIVERY_ENGINES) wakes on the same commits, so two
 * rounds in one process each claimed and marked a handful of emails a statement, and a statement's
 * fixed cost (the round trip, the executor, the commit's WAL flush) was most of its cost. One
 * statement of each kind is in flight at a time; what arrives meanwhile goes in the next one. A failed statement fails every request in it, and each round handles that
 * as it did its own statement (a failed claim ends the round; failed marks are written again,
 * temporal/delivery/sent-marks.ts).
 */
export class EngineStatements {
  private readonly claims: Coalescer<ClaimRequest, Claim>;
  private readonly marks: Coalescer<SentMark[], undefined>;

  constructor(em: EntityManager) {
    this.claims = new Coalescer((requests) => claimShared(em, requests), { maxBatch: 16, maxInFlight: 1 });
    this.marks = new Coalescer(
      async (batches) => {
        await markEmailsSent(em, batches.flat());
        return batches.map(() => undefined);
      },
      { maxBatch: 64, maxInFlight: 1 },
    );
  }

  claim(request: ClaimRequest): Promise<Claim> {
    return request.limit > 0 ? this.claims.run(request) : Promise.resolve({ emails: [], throttledForMs: null });
  }

  markSent(marks: SentMark[]): Promise<undefined> {
    return marks.length ? this.marks.run(marks) : Promise.resolve(undefined);
  }
}

/**
 * One claim per kind of request (queue, lease, which) for the sum of their limits; the emails are
 * dealt out in claim order, each request up to its limit, and each hears when a throttled project
 * may send again. Every claimed email goes to a request: the statement claims no more than they
 * asked for together.
 */
async function claimShared(em: EntityManager, requests: ClaimRequest[]): Promise<(Claim | Error)[]> {
  const answers: (Claim | Error)[] = requests.map(() => ({ emails: [], throttledForMs: null }));
  const groups = new Map<string, number[]>();
  requests.forEach((r, i) => {
    const key = JSON.stringify([r.queue, r.leaseSeconds, r.which]);
    const members = groups.get(key);
    if (members) members.push(i);
    else groups.set(key, [i]);
  });
  for (const members of groups.values()) {
    const first = requests[members[0]!]!;
    const total = members.reduce((n, i) => n + requests[i]!.limit, 0);
    let claimed: Claim;
    try {
      claimed = await claimDueEmails(em, first.queue, total, first.leaseSeconds, first.which);
    } catch (err) {
      for (const i of members) answers[i] = err instanceof Error ? err : new Error(String(err));
      continue;
    }
    let next = 0;
    for (const i of members) {
      answers[i] = { emails: claimed.emails.slice(next, next + requests[i]!.limit), throttledForMs: claimed.throttledForMs };
      next += requests[i]!.limit;
    }
  }
  return answers;
}
