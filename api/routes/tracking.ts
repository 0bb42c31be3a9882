import { z } from 'zod';
import { recordClick, recordOpen } from '../../db/messages/engagement';
import { TRANSPARENT_GIF, verifyClickToken, verifyOpenToken } from '../../mail/tracking';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';

const tokenParams = z.object({ token: z.string() });

const NO_CACHE = {
  'Cache-Control': 'no-store, no-cache, must-revalidate, private, max-age=0',
  Pragma: 'no-cache',
  Expires: '0',
};

/**
 * Open and click tracking (engagement; the events of `POST /v1/track` are api/routes/public.ts):
 * the open pixel and the click redirect written into tracked mail (mail/tracking.ts). No key: the
 * signed token is the credential. Recording never stands between a reader and the answer: a
 * failure to record is logged, the pixel or the redirect is served all the same. HEAD requests
 * (link checkers) are answered but not counted.
 */
export function registerTrackingRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/t/o/:token',
    tag: 'Tracking',
    summary: 'Open pixel: a 1×1 transparent GIF; records an open of the email (any token gets the image)',
    auth: 'none',
    params: tokenParams,
    raw: true,
    handler: async ({ scope, params, req, res }) => {
      const emailId = verifyOpenToken(deps.linkSecret, params.token);
      if (emailId && req.method === 'GET') {
        await recordOpen(scope.em, emailId).catch((err: unknown) => req.log.error({ err, emailId }, 'recording an open failed'));
      }
      res.status(200).set(NO_CACHE).type('image/gif').send(TRANSPARENT_GIF);
    },
  });

  api.add({
    method: 'get',
    path: '/t/c/:token',
    tag: 'Tracking',
    summary: 'Tracked link: records a click and redirects (302) to the URL the token was signed for; 404 for any other token',
    // Documentation only: a raw route sets its own status.
    status: 302,
    auth: 'none',
    params: tokenParams,
    raw: true,
    handler: async ({ scope, params, req, res }) => {
      const click = verifyClickToken(deps.linkSecret, params.token);
      if (!click) {
        res.status(404).set(NO_CACHE).type('text/plain').send('Link not valid');
        return;
      }
      if (req.method === 'GET') {
        await recordClick(scope.em, click.emailId, click.url).catch((err: unknown) =>
          req.log.error({ err, emailId: click.emailId }, 'recording a click failed'),
        );
      }
      res.status(302).set(NO_CACHE).set('Referrer-Policy', 'no-referrer').location(click.url).end();
    },
  });
}
