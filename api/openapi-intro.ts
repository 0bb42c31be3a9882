/**
 * The prose of the reference: `info.description` (getting started, conventions, template variables)
 * and one description per tag. Markdown, rendered by Swagger UI at /docs. Kept out of openapi.ts so
 * the document's structure and its words can be read (and changed) apart.
 */

export interface IntroSettings {
  /** PUBLIC_URL: every example below is written against it. */
  publicUrl: string;
  rateLimitPerMinute: number;
  /** No SMTP_URL: mail goes to the local outbox. */
  outbox: boolean;
}

export function introduction({ publicUrl, rateLimitPerMinute, outbox }: IntroSettings): string {
  const mode = outbox
    ? 'This server runs in **outbox mode** (no `SMTP_URL` configured).'
    : 'This server sends through an SMTP relay (`SMTP_URL` is configured).';
  return `Transactional email, contacts, events, templates, campaigns and event-triggered workflows.

# Getting started

## Base URL

\`${publicUrl}\` (the server's \`PUBLIC_URL\`). The public sending API lives under \`/v1/\`
(\`/v1/send\`, \`/v1/track\`, \`/v1/verify\`); everything else is at the root (\`/contacts\`, \`/domains\`, …).
Bodies are JSON (\`Content-Type: application/json\`).

## Keys

Every project has two keys, sent as \`Authorization: Bearer <key>\`:

- the **secret key** \`sk_…\` works on every project endpoint. Keep it on your servers.
- the **public key** \`pk_…\` works on \`POST /v1/track\` only, so it can ship in a web page.

Keys are shown once, when the project is created (and when they are regenerated). To get them, either
sign up and create a project:

\`\`\`bash
curl -c jar -H 'Content-Type: application/json' \\
     -d '{"email":"me@example.com","password":"a long password"}' ${publicUrl}/auth/signup
curl -b jar -H 'Content-Type: application/json' \\
     -d '{"name":"demo"}' ${publicUrl}/users/@me/projects    # → {…, "secretKey": "sk_…", "publicKey": "pk_…"}
\`\`\`

or, on the machine that runs the service, \`npx tidings project create <name> --owner <email>\`.

The dashboard's session cookie works on the same endpoints; with a session, name the project in the
\`X-Project-Id\` header (it is ignored when a key is used).

## Your first email

Mail goes out from a domain of the project. Add one with \`POST /domains\`:

\`\`\`bash
curl -H 'Authorization: Bearer sk_…' -H 'Content-Type: application/json' \\
     -d '{"domain":"example.com"}' ${publicUrl}/domains
\`\`\`

- **Outbox mode** (no \`SMTP_URL\` configured): the domain counts as verified for sending at once,
  and mail is written to the local outbox instead of being sent. Read a project's own mail in the
  dashboard's Outbox (\`/app\`, or \`GET /projects/{id}/outbox\`), all of it at \`/outbox\` (from the
  machine that runs the service, not through a proxy), or as \`.eml\` files in \`$DATA_DIR/outbox\`.
- **With a relay** (\`SMTP_URL\` set): publish the DNS records the response lists; the domain is
  verified when its DKIM record is found (checked in the background, or now with
  \`GET /domains/{id}/verify\`). Until then sends from it get 403 \`DOMAIN_NOT_VERIFIED\`.

${mode}

Then send:

\`\`\`bash
curl -H 'Authorization: Bearer sk_…' -H 'Content-Type: application/json' \\
     -d '{"to":"ada@example.org","from":"hello@example.com","subject":"Hello {{email}}","body":"<p>It works.</p>"}' \\
     ${publicUrl}/v1/send
\`\`\`

The answer comes at once with one email id per recipient; delivery is durable and retried in the background.
What became of an email (status, delivery attempts, the relay's answer, opens, clicks): \`GET /emails/{id}\`.

## Official Node client

\`@plunk/node\` works unchanged. Point \`baseUrl\` at this server's \`/v1/\`, **with the trailing
slash** (the client resolves \`send\` and \`track\` against it, so without the slash they miss \`/v1\`):

\`\`\`ts
import Plunk from '@plunk/node';

const plunk = new Plunk('sk_…', { baseUrl: '${publicUrl}/v1/' });
await plunk.emails.send({ to: 'ada@example.org', from: 'hello@example.com', subject: 'Hello', body: '<p>Hi</p>' });
await plunk.events.track({ event: 'signed-up', email: 'ada@example.org', data: { plan: 'pro' } });
\`\`\`

## Errors

Every error has the same envelope; \`message\` repeats \`error.message\`, \`error.errors\` lists the fields of a
422, and \`error.requestId\` is also the \`X-Request-Id\` response header (quote it when asking for help):

\`\`\`json
{
  "success": false,
  "message": "Request validation failed: email: Invalid email address",
  "error": {
    "code": "VALIDATION_ERROR",
    "message": "Request validation failed: email: Invalid email address",
    "statusCode": 422,
    "requestId": "3f1c2a9e-5d7b-4c1e-9a0f-2b6d8e4c7a15",
    "errors": [{ "field": "email", "message": "Invalid email address", "code": "invalid_string" }],
    "suggestion": "Fix the fields listed in error.errors and send the request again."
  },
  "timestamp": "2026-01-15T10:00:00.000Z"
}
\`\`\`

Branch on \`error.code\` (\`MISSING_AUTH\`, \`INVALID_API_KEY\`, \`DOMAIN_NOT_VERIFIED\`, \`CONTACT_NOT_FOUND\`,
\`BILLING_LIMIT_EXCEEDED\`, \`RATE_LIMIT_EXCEEDED\`, …); the status alone is coarser. A 503
\`DATABASE_UNAVAILABLE\` (with \`Retry-After\`) means the service's database cannot be reached for the moment:
retry later, with the same \`Idempotency-Key\` where the route takes one.

## Pagination

Lists are newest first with a cursor: pass \`limit\` (1–100, default 20) and, for the next page, the
\`cursor\` of the previous answer. The answer is \`{data, cursor, hasMore, total}\`; \`cursor\` is \`null\` on the
last page and \`total\` is counted on the first page only. Items created while you page do not make you
see anything twice. A few lists (segment members) are page-based instead: \`page\` and \`pageSize\`.

## Rate limits

${rateLimitPerMinute} requests per minute per project, counted across every API process. Each answer
carries \`RateLimit-Limit\`, \`RateLimit-Remaining\` and \`RateLimit-Reset\` (seconds until the window
restarts); over the limit the answer is 429 \`RATE_LIMIT_EXCEEDED\` with \`Retry-After\` in seconds.

## Idempotency

\`POST /v1/send\` and \`POST /v1/track\` take an \`Idempotency-Key\` header (1–255 printable ASCII
characters without spaces, for example a UUID). Within 24 hours a repeat with the same key and the same
body is not executed again: it gets the first answer back, with \`Idempotent-Replayed: true\`. The same key
with a different body is 409 \`IDEMPOTENCY_KEY_REUSED\`. A repeat while the first request is still
running waits for it (up to 5 s) and gets its answer, or runs if the first one failed; past that wait it is
409 \`IDEMPOTENCY_KEY_IN_PROGRESS\` (retry shortly). A key is stored with its request's effects, in one
transaction: a request that failed, or was cut off by a crash, leaves no key behind.

# Template variables

Subjects and bodies (of \`/v1/send\`, templates and campaigns) are Handlebars. For each recipient they see:

| Variable | Value |
|---|---|
| \`{{id}}\`, \`{{email}}\`, \`{{subscribed}}\` | the contact's id, email and subscription state |
| \`{{locale}}\` | the contact's \`data.locale\`, or empty |
| \`{{unsubscribeUrl}}\`, \`{{subscribeUrl}}\`, \`{{manageUrl}}\` | signed links to this contact's unsubscribe, subscribe and preferences pages |
| \`{{svc_id}}\`, \`{{svc_email}}\` | the contact's id and email again (names that never clash with your data) |
| \`{{data.plan}}\` | a custom field of the contact (on \`/v1/send\`, with that request's \`data\` applied) |
| \`{{plan}}\` | every data key at the top level too (the fields above win on a name clash) |

- \`{{key ?? "fallback"}}\` renders the fallback (without its quotes) when \`key\` is missing or null;
  \`0\`, \`false\` and \`""\` are values. Chains work: \`{{nickname ?? name ?? "there"}}\`.
- Unknown variables render empty. Dotted paths reach nested data: \`{{data.address.city}}\`.
- Bodies are HTML-escaped (\`{{{html}}}\` inserts raw HTML); subjects are not.
- A syntax error is a 422 naming \`subject\` or \`body\` when the template is saved or the email is sent,
  never a failure later.
- MARKETING mail whose body has no \`{{unsubscribeUrl}}\` link (nor a \`{{manageUrl}}\` one) gets a small footer with one.
- On \`/v1/send\`, \`type: "markdown"\` renders the body as Markdown to HTML.
`;
}

/** One line or two per tag; tags without an entry are listed after these, undescribed. */
export const TAG_DESCRIPTIONS: Record<string, string> = {
  'Public API':
    'Sending, tracking and address verification: the endpoints an application calls. Answers are `{success, data}` envelopes.',
  Emails: 'Every email the project sent or tried to send (transactional, campaign, workflow) and what became of it.',
  Contacts:
    'People you mail. A contact is one email per project with a `subscribed` flag and free-form `data` (custom fields, typed on first use).',
  'Contact fields': 'The custom fields found in contacts\' `data`: their types, coverage and values.',
  Events:
    'Named events about contacts: tracked by you (`/v1/track`) or emitted by the service (`email.*`, `contact.*`, `segment.*`). They trigger workflows and feed segments.',
  Domains:
    'Sending domains. Mail can only come from a domain of the project; the service generates its DKIM key and tells you which DNS records to publish.',
  Templates:
    'Reusable subjects and bodies (Handlebars) with an optional sender, for `/v1/send` and workflow SEND_EMAIL steps.',
  Campaigns:
    'One-off marketing mail to a segment (or every subscribed contact), now or at a scheduled time. DRAFT → SENDING or SCHEDULED → SENT; CANCELLED stops it.',
  Segments:
    'Groups of contacts: DYNAMIC ones follow a condition (data, events, engagement, other segments), STATIC ones hold the members you add.',
  Workflows:
    'Journeys triggered by an event: a graph of steps (SEND_EMAIL, DELAY, WAIT_FOR_EVENT, CONDITION, WEBHOOK, UPDATE_CONTACT, EXIT) joined by transitions. Each contact that enters runs as its own durable execution.',
  'Workflow executions': 'One contact\'s run through a workflow: its status, current step and step history.',
  Activity: 'A feed of what happened in the project: events, workflow runs, campaigns.',
  Analytics: 'Sending and engagement figures over time.',
  Uploads: 'Images for email bodies, served at a stable public URL.',
  'Subscription pages': 'The pages behind `{{unsubscribeUrl}}`, `{{subscribeUrl}}` and `{{manageUrl}}` (HTML, signed links).',
  Tracking: 'Open pixel and click redirects of tracked mail.',
  Webhooks: 'Delivery, bounce and complaint notifications from the mail relay, and payment events.',
  Authentication: 'Dashboard accounts: sign-up, sign-in (session cookie), email verification, password reset, OAuth.',
  'Users and projects':
    "The signed-in user and the projects they belong to (a session), and each project's settings (a member's session, or the project's own secret key).",
  Projects: 'Project status for members and keys.',
  Members: 'Who can use a project from the dashboard, and with which role (OWNER, ADMIN, MEMBER).',
  Billing: 'Monthly sending caps per category, consumption, and the payment provider when configured.',
  Service: 'Health, configuration and this reference.',
};
