import { isGrpcServiceError, ServiceError } from '@temporalio/client';
import { AppError } from '../../errors';

/**
 * Write a row, then start its workflow: the one rule of every use case in this folder (a use case
 * is what one API endpoint or CLI command does, composed of db/ writes and temporal/<feature>/lifecycle.ts
 * calls; docs/design.md, "Write a row, then start its workflow").
 *
 * 1. The row is written first and the Temporal call (start, signal-with-start, update, cancel) is
 *    the last step: a workflow reads its row, never the request.
 * 2. The workflow id comes from the row (temporal/ids.ts) and a start joins the execution already
 *    under way (USE_EXISTING, signal-with-start, REJECT_DUPLICATE for journeys), so a start that is
 *    repeated after a lost answer starts nothing twice.
 * 3. A failed call undoes the write before the request fails, so no row promises work nobody does:
 *    - where the workflow can wait for the commit (it waits on the row's lock, retries until the row
 *      is visible, or is being stopped), the call runs inside the write's transaction and a failure
 *      rolls the write back: campaign send, reschedule and cancel, account mail, domain removal,
 *      execution cancel;
 *    - where the workflow must find a new row at once, the row is committed first and a failure
 *      undoes it with a second write (`callTemporal`'s `undo`): an import or bulk job is marked
 *      failed with the reason, a new domain is removed, a journey entry's claim is released.
 * 4. The request then fails: 503 `TEMPORAL_UNAVAILABLE` when Temporal could not be reached, any
 *    other failure as it is. Nothing is left half-done, so repeating the request is safe.
 *
 * `/v1/send` and `/v1/track` call no workflow: they write outbox rows in one transaction, which
 * the delivery engine and the trigger dispatcher pick up (use-cases/public.ts).
 */
export async function callTemporal<T>(call: () => Promise<T>, undo?: (err: unknown) => Promise<unknown>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    await undo?.(err);
    throw temporalUnreachable(err) ? temporalUnavailable(err) : err;
  }
}

/** gRPC codes of a server that cannot answer now: UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED. */
const UNREACHABLE_CODES = new Set([14, 4, 8]);

/** The client wraps a failed call in its ServiceError; the gRPC status is its cause. */
function temporalUnreachable(err: unknown): boolean {
  const grpc = err instanceof ServiceError ? err.cause : err;
  return isGrpcServiceError(grpc) && UNREACHABLE_CODES.has(grpc.code);
}

const temporalUnavailable = (cause: unknown) =>
  Object.assign(
    new AppError(503, 'TEMPORAL_UNAVAILABLE', 'The workflow service (Temporal) cannot be reached; the request was not carried out', {
      suggestion: 'Retry shortly: the request is safe to repeat.',
    }),
    { cause },
  );

/** What the reference says of the 503 a use case adds to the database's (the route's `errors`). */
export const TEMPORAL_UNAVAILABLE_TEXT =
  '`TEMPORAL_UNAVAILABLE`: the workflow service cannot be reached; the request was not carried out, so retry it. Also `DATABASE_UNAVAILABLE` (with `Retry-After`) while the database cannot be reached.';
