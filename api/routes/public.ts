import { queueSend } from '../../db/send';
import { forgetIdempotencyKey, idempotent } from '../../db/idempotency';
import { type TrackedEvent, trackEvent } from '../../db/track';
import { deliverTrackedEvent } from '../../temporal/triggers';
import type { AppDeps } from '../context';
import { idempotencyKey } from '../idempotency-key';
import type { RouteContext, RouteRegistry } from '../routing';
import { MESSAGE_MAX_BYTES, sendBody, sendResponse } from '../schemas/send';
import { trackBody, trackResponse } from '../schemas/events';
import type { Response } from 'express';
import type { z } from 'zod';

/** The public API (`/v1/…`): `{success, data}` envelopes, `Idempotency-Key` honoured. */
export function registerPublicRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/v1/send',
    tag: 'Public API',
    summary: 'Send a transactional email to one or more recipients (queued at once, delivered by a workflow)',
    auth: 'secret',
    body: sendBody,
    // Attachments travel base64-encoded: 40 MB of message needs a little more than that as JSON.
    bodyLimit: '55mb',
    response: sendResponse,
    handler: async ({ scope, project, body, req, res }) => {
      const result = await idempotent(scope.em, project.id, 'send', idempotencyKey(req), body, async (tx) => {
        const emails = await queueSend(
          tx,
          { projectId: project.id, publicUrl: deps.config.publicUrl, linkSecret: deps.linkSecret, maxMessageBytes: MESSAGE_MAX_BYTES },
          body,
        );
        // Started before the commit: if Temporal refuses, the rows roll back and the client can retry.
        await deps.temporal.sendEmails(project.id, emails.map((e) => e.email));
        return { status: 200, body: { success: true, data: { emails, timestamp: new Date().toISOString() } } };
      });
      return replay(res, result);
    },
  });

  const track = async ({
    scope,
    project,
    body,
    req,
    res,
  }: Pick<RouteContext<'secret', z.output<typeof trackBody>, undefined, undefined>, 'scope' | 'project' | 'body' | 'req' | 'res'>) => {
    const key = idempotencyKey(req);
    let tracked: TrackedEvent | undefined;
    const result = await idempotent(scope.em, project.id, 'track', key, body, async (tx) => {
      tracked = await trackEvent(tx, project.id, body);
      return { status: 200, body: { success: true, data: { contact: tracked.contact, event: tracked.event, timestamp: tracked.timestamp } } };
    });
    // After the commit, so executions see the contact. Should Temporal refuse, the key is released:
    // a retry records the event again rather than losing the workflows it triggers.
    if (tracked) {
      const event = tracked;
      await deliverTrackedEvent(
        { em: scope.em, temporal: deps.temporal, config: deps.config },
        { projectId: project.id, contactId: event.contact, eventId: event.event, name: body.event, trackedAt: event.timestamp, context: event.context },
      ).catch(async (err: unknown) => {
        await forgetIdempotencyKey(scope.em, project.id, 'track', key);
        throw err;
      });
    }
    return replay(res, result);
  };

  api.add({
    method: 'post',
    path: '/v1/track',
    tag: 'Public API',
    summary: 'Track an event for a contact (created when absent; public or secret key)',
    auth: 'publicOrSecret',
    body: trackBody,
    response: trackResponse,
    handler: track,
  });

  api.add({
    method: 'post',
    path: '/events/track',
    tag: 'Events',
    summary: 'Dashboard alias of POST /v1/track',
    auth: 'secret',
    body: trackBody,
    response: trackResponse,
    handler: track,
  });
}

function replay(res: Response, result: { status: number; body: unknown; replayed: boolean }) {
  res.status(result.status);
  if (result.replayed) res.setHeader('Idempotent-Replayed', 'true');
  return result.body;
}
