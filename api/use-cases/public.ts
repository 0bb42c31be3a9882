import type { z } from 'zod';
import { type TrackedEvent, trackEvent } from '../../db/events/track';
import { type QueuedEmail, queueSend, SendBatches } from '../../db/messages/send';
import { idempotent, type StoredResponse } from '../../db/projects/idempotency';
import { outboxNotice } from '../../mail/outbox';
import type { AppDeps, RequestScope } from '../context';
import type { trackBody } from '../schemas/events';
import { MESSAGE_MAX_BYTES, type sendBody } from '../schemas/send';

/**
 * The public API's writes call no workflow: each writes its rows (emails, or events with their
 * trigger outbox rows) in one transaction or one statement, so a 200 means they are committed,
 * then wakes the engine that takes them, which also looks on its own.
 */
type Replayable = StoredResponse & { replayed: boolean };

/**
 * POST /v1/send: one QUEUED email row per recipient (db/messages/send.ts, one write path), then the
 * delivery engine is woken (not when the answer was replayed). The common request (one recipient,
 * no Idempotency-Key) shares its statements with concurrent requests; any other runs in a
 * transaction, the key's when it has one.
 */
export async function sendTransactional(
  deps: Pick<AppDeps, 'config' | 'linkSecret' | 'wakeups' | 'sending'>,
  scope: Pick<RequestScope, 'em'>,
  projectId: string,
  idempotencyKey: string | undefined,
  body: z.output<typeof sendBody>,
): Promise<Replayable> {
  const ctx = {
    projectId,
    publicUrl: deps.config.publicUrl,
    linkSecret: deps.linkSecret,
    maxMessageBytes: MESSAGE_MAX_BYTES,
    senders: deps.config,
    queue: deps.config.temporal.taskQueue,
  };
  const answer = (emails: QueuedEmail[]): StoredResponse => {
    const outbox = deps.config.outbox ? { outbox: outboxNotice(deps.config.publicUrl) } : {};
    return { status: 200, body: { success: true, data: { emails, timestamp: new Date().toISOString(), ...outbox } } };
  };
  // The request's entity manager is forked only on the paths that use it (RequestScope.em).
  const result =
    idempotencyKey === undefined && SendBatches.takes(body)
      ? { ...answer(await deps.sending.send(scope, ctx, body)), replayed: false }
      : await idempotent(scope.em, projectId, 'send', idempotencyKey, body, async (tx) => answer(await queueSend(tx, ctx, body)));
  if (!result.replayed) deps.wakeups.emails(ctx.queue);
  return result;
}

/**
 * POST /v1/track and /events/track: the event, and in the same statement what it triggers; then
 * the dispatcher is woken. Without an Idempotency-Key the statement is shared with concurrent
 * requests (TrackBatches); with one, it runs in the key's transaction.
 */
export async function trackAndTrigger(
  deps: Pick<AppDeps, 'config' | 'wakeups' | 'tracking'>,
  scope: Pick<RequestScope, 'em'>,
  projectId: string,
  idempotencyKey: string | undefined,
  body: z.output<typeof trackBody>,
): Promise<Replayable> {
  const answer = (tracked: TrackedEvent): StoredResponse => ({
    status: 200,
    body: { success: true, data: { contact: tracked.contact, event: tracked.event, timestamp: tracked.timestamp } },
  });
  // The event and what it triggers in one statement: a 200 is a promise kept after any crash.
  let queued = false;
  let result: Replayable;
  if (idempotencyKey === undefined) {
    const tracked = await deps.tracking.track(projectId, body);
    queued = tracked.queued;
    result = { ...answer(tracked), replayed: false };
  } else {
    result = await idempotent(scope.em, projectId, 'track', idempotencyKey, body, async (tx) => {
      const tracked = await trackEvent(tx, projectId, body);
      queued = tracked.queued;
      return answer(tracked);
    });
  }
  if (queued) deps.wakeups.triggers(deps.config.temporal.taskQueue);
  return result;
}
