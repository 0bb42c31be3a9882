import { getEmailDetail, listEmails } from '../../db/messages/status';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage } from '../schemas/common';
import { emailDetailSchema, emailIdParams, emailSummarySchema, listEmailsQuery } from '../schemas/emails';

/** The emails of a project (transactional, campaign and workflow), for finding out what became of one. */
export function registerEmailRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/emails',
    tag: 'Emails',
    summary: 'List emails, newest first (cursor pagination; filter by `contactId` and/or `status`)',
    description: `Pages of up to \`limit\` emails (default 20, at most 100) of every source (transactional, campaign,
workflow), newest first, in a summary shape; \`GET /emails/{id}\` has the rest. Pass the returned \`cursor\` to get
the next page; it is \`null\` on the last one. \`total\` counts the matching emails on the first page.`,
    auth: 'secret',
    query: listEmailsQuery,
    response: cursorPage(emailSummarySchema),
    handler: ({ scope, project, query }) => listEmails(scope.em, project.id, query),
  });

  api.add({
    method: 'get',
    path: '/emails/:id',
    tag: 'Emails',
    summary:
      "What became of one email: status, delivery attempts and the relay's last answer, delivery, bounce and complaint times, opens and clicks (no body)",
    description: `The id is the one \`POST /v1/send\` returned (or an \`emailId\` in an \`email.*\` event). The status
moves QUEUED → SENDING → SENT → DELIVERED → OPENED → CLICKED as far as it is known; BOUNCED comes from the relay's
own refusal or the mail infrastructure's notifications, COMPLAINED from the latter; FAILED means it never went (refused
by the relay for another reason than its recipient, a suppressed address with \`error\` \`suppressed\`, a monthly cap, a
disabled project). While the relay defers an email (a 4xx reply) it stays SENDING and is retried with backoff:
\`attempts\` grows and \`relayResponse\` and \`error\` say why. While the relay cannot be reached at all, mail waits
QUEUED (no attempt counted) with \`error\` saying so, until the relay answers again. A 5xx reply to the recipient or
the message (\`550 5.1.1 User unknown\`) is a hard bounce: BOUNCED, \`bounceType\` hard, that reply in \`relayResponse\`
and \`error\`, the address suppressed for the project. Any other 5xx (to the sender, a message too large) makes it
FAILED with that reply. The body is not returned.`,
    auth: 'secret',
    params: emailIdParams,
    response: emailDetailSchema,
    handler: ({ scope, project, params }) => getEmailDetail(scope.em, project.id, params.id),
  });
}
