import type { AppDeps } from '../context';
import { idempotencyKey } from '../idempotency-key';
import type { RouteContext, RouteRegistry } from '../routing';
import { ERROR_TEXT } from '../openapi';
import { sendExamples, trackExamples } from '../schemas/public-examples';
import { sendBody, sendResponse } from '../schemas/send';
import { trackBody, trackResponse } from '../schemas/events';
import { sendTransactional, trackAndTrigger } from '../use-cases/public';
import type { Response } from 'express';
import type { z } from 'zod';

/** The public API (`/v1/…`): `{success, data}` envelopes, `Idempotency-Key` honoured. */
export function registerPublicRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/v1/send',
    tag: 'Public API',
    summary: 'Send a transactional email to one or more recipients (queued at once, delivered by the delivery engine)',
    description: `Renders and queues one email per recipient in one database transaction, then answers at once with
their ids: a 200 means the emails are stored and will be delivered, whatever fails afterwards. The delivery
engine sends them within milliseconds (statuses QUEUED → SENDING → SENT → DELIVERED / OPENED / CLICKED, or
BOUNCED / FAILED); an email the relay refuses for now (4xx) or cannot get through is retried with backoff
for as long as it takes, by its own workflow.

- \`to\`: an address, \`{name, email}\`, or an array of up to 100 of them. Each recipient gets its own
  message, rendered with its own contact's variables. Recipients become contacts if they are not;
  **new contacts are not subscribed** unless \`subscribed: true\` is sent, and a \`name\` given in \`to\`
  is stored as \`data.name\`.
- \`subject\` and \`body\` (HTML, Handlebars) are required unless \`template\` is given; given with a
  template, they replace its own. With \`type: "markdown"\` the body is Markdown, rendered to HTML.
- \`from\` is required unless the template has a sender. Its domain must be one of the project's
  domains: verified, or just registered in outbox mode (otherwise 403 \`DOMAIN_NOT_VERIFIED\`).
- \`data\` is stored on each contact (null removes a key; \`{value, persistent: false}\` is used for
  this send only) and is available to the template as \`{{data.key}}\` and \`{{key}}\`.
- Attachments: at most 10, 10 MB decoded in total, the whole message at most 40 MB (413 beyond).
- With a MARKETING template the mail carries one-click unsubscribe headers and, unless
  \`tracking: false\`, open and click tracking.
- Over the project's monthly transactional cap nothing is queued (402).
- Send an \`Idempotency-Key\` to make retries safe.`,
    idempotent: true,
    errors: { 402: ERROR_TEXT.billingLimit, 403: ERROR_TEXT.domainNotVerified, 409: ERROR_TEXT.idempotency },
    examples: sendExamples,
    auth: 'secret',
    body: sendBody,
    // Attachments travel base64-encoded: 40 MB of message needs a little more than that as JSON.
    bodyLimit: '55mb',
    response: sendResponse,
    handler: async ({ scope, project, body, req, res }) =>
      replay(res, await sendTransactional(deps, scope, project.id, idempotencyKey(req), body)),
  });

  const track = async ({
    scope,
    project,
    body,
    req,
    res,
  }: Pick<RouteContext<'secret', z.output<typeof trackBody>, undefined, undefined>, 'scope' | 'project' | 'body' | 'req' | 'res'>) =>
    replay(res, await trackAndTrigger(deps, scope, project.id, idempotencyKey(req), body));

  api.add({
    method: 'post',
    path: '/v1/track',
    tag: 'Public API',
    summary: 'Track an event for a contact (created when absent; public or secret key)',
    description: `Records that \`event\` happened to the contact with \`email\`, creating the contact when absent
(subscribed, unless \`subscribed: false\`). \`data\` is merged into the contact's data with the usual rules
(null removes a key, \`{value, persistent: false}\` reaches triggered workflows without being stored) and kept
on the event.

Then every enabled workflow triggered by this event name starts an execution for the contact (subject to
its re-entry rule), and the contact's executions waiting for this event move on. Both happen right after the
answer, from a record written in the same transaction as the event: a 200 means they will happen.

The **public key** (\`pk_…\`) works here, so a web page can call it directly (CORS allowed). Names starting
with \`email.\`, \`contact.\` or \`segment.\` are reserved for events the service emits (422).
Send an \`Idempotency-Key\` to make retries safe.`,
    idempotent: true,
    errors: { 409: ERROR_TEXT.idempotency },
    examples: trackExamples,
    auth: 'publicOrSecret',
    // Pages call it straight from the browser with the public key.
    cors: true,
    body: trackBody,
    response: trackResponse,
    handler: track,
  });

  api.add({
    method: 'post',
    path: '/events/track',
    tag: 'Events',
    summary: 'Dashboard alias of POST /v1/track',
    description: 'Same body, rules and answer as `POST /v1/track` (they share `Idempotency-Key`s), for the secret key or a session.',
    idempotent: true,
    errors: { 409: ERROR_TEXT.idempotency },
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
