import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type RequestHandler } from 'express';
import { z } from 'zod';
import { applyNotification } from '../../db/messages/engagement';
import { AppError, validationError } from '../../errors';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { normalizeNotifications, notifyBody, notifyResponse } from '../schemas/notify';
import { toFieldErrors } from '../validation';

const NOTIFY_PATH = '/webhooks/notify';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** The secret a request presents: `Bearer <secret>`, or HTTP Basic with it as password (or as user). */
function presentedSecret(header: string | undefined): string | undefined {
  const match = /^(Bearer|Basic)\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) return undefined;
  if (match[1]!.toLowerCase() === 'bearer') return match[2];
  const decoded = Buffer.from(match[2]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return decoded;
  return decoded.slice(colon + 1) || decoded.slice(0, colon);
}

/**
 * In front of the route (before any body is read): the endpoint is off without NOTIFY_SECRET
 * (404 FEATURE_DISABLED), and needs the secret (401). Then the body is parsed as JSON whatever
 * its declared type, since SNS posts `text/plain`; the route's own JSON parser then finds it read.
 */
function notifyGate(secret: string | undefined): RequestHandler[] {
  const expected = secret === undefined ? undefined : digest(secret);
  const challenge = { 'WWW-Authenticate': 'Basic realm="tidings-notify"' };
  const gate: RequestHandler = (req, _res, next) => {
    if (req.method !== 'POST') return next();
    if (!expected) {
      return next(
        new AppError(404, 'FEATURE_DISABLED', 'Delivery notifications are not enabled on this server', {
          suggestion: 'Set NOTIFY_SECRET and send it as `Authorization: Bearer <NOTIFY_SECRET>`.',
        }),
      );
    }
    const given = presentedSecret(req.headers.authorization);
    if (given === undefined) {
      return next(
        new AppError(401, 'MISSING_AUTH', 'Missing notification secret', {
          suggestion: 'Send `Authorization: Bearer <NOTIFY_SECRET>` (or HTTP Basic with it as the password).',
          headers: challenge,
        }),
      );
    }
    if (!timingSafeEqual(digest(given), expected)) {
      return next(
        new AppError(401, 'INVALID_CREDENTIALS', 'Invalid notification secret', {
          suggestion: 'Use the NOTIFY_SECRET this server was started with.',
          headers: challenge,
        }),
      );
    }
    next();
  };
  const parse = express.json({ type: ['application/json', 'application/*+json', 'text/plain'], limit: '1mb', strict: false });
  return [gate, (req, res, next) => (req.method === 'POST' ? parse(req, res, next) : next())];
}

/** Delivery, bounce and complaint notifications from the mail infrastructure (see api/schemas/notify.ts). */
export function registerNotifyRoutes(api: RouteRegistry, deps: AppDeps): void {
  // Mounted with `use` (no route of its own): runs first and is not a second operation in the API.
  api.router.use(NOTIFY_PATH, ...notifyGate(deps.config.notifySecret));

  api.add({
    method: 'post',
    path: NOTIFY_PATH,
    tag: 'Webhooks',
    summary:
      'Delivery, bounce and complaint notifications from the mail infrastructure (own JSON or SES via SNS); ' +
      'Authorization: Bearer <NOTIFY_SECRET>; 202 when some matched no email',
    auth: 'none',
    body: notifyBody,
    response: notifyResponse,
    handler: async ({ scope, body, req, res }) => {
      let normalized;
      try {
        normalized = normalizeNotifications(body);
      } catch (err) {
        if (err instanceof z.ZodError) throw validationError(toFieldErrors(err));
        throw err;
      }
      if (normalized.subscription) {
        // No outgoing calls from here: the operator confirms the subscription by opening the URL.
        req.log.warn(normalized.subscription, 'SNS subscription confirmation received: open SubscribeURL to confirm it');
      }
      let processed = 0;
      let ignored = normalized.ignored;
      for (const notification of normalized.notifications) {
        if ((await applyNotification(scope.em, notification)) === 'processed') processed++;
        else ignored++;
      }
      res.status(ignored > 0 ? 202 : 200);
      return { processed, ignored };
    },
  });
}
