import type { Request } from 'express';
import { z } from 'zod';
import { AppError, notFound } from '../../errors';
import { escapeHtml } from '../../mail/html';
import { listOutbox, type OutboxMessage, outboxDir, readOutboxMessage } from '../../mail/outbox';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { projectIdParam } from '../schemas/accounts';
import { outboxMessageParams, outboxMessageSchema, outboxPageSchema, projectOutboxQuery } from '../schemas/outbox';
import { listProjectOutbox, readProjectOutboxMessage } from '../use-cases/outbox';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/** Headers a proxy adds: a request carrying one was passed on from somewhere else. */
const PROXY_HEADERS = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-real-ip'];

const notLocal = (why: string) =>
  new AppError(403, 'OUTBOX_LOCAL_ONLY', `The outbox pages are shown only to a browser on the machine that runs the service: ${why}`, {
    suggestion: "Open the project's Outbox in the dashboard (/app), which shows each project its own mail, or read the .eml files in $DATA_DIR/outbox.",
  });

/**
 * The outbox holds every project's mail, so these pages are shown only where it is a developer's
 * own: in outbox mode, to a client on the loopback socket that no proxy passed on. A proxy on the
 * same host connects from loopback too, so a request with a proxy's header is refused, and so is
 * every request once the operator sets TRUST_PROXY (a proxy may strip or not add those headers).
 */
function requireLocalOutbox(deps: AppDeps, req: Request): string {
  if (!deps.config.outbox) throw notFound('outbox');
  if (deps.config.trustProxySet) throw notLocal('TRUST_PROXY is set, so requests may come through a proxy');
  if (PROXY_HEADERS.some((h) => req.headers[h] !== undefined)) throw notLocal('this request came through a proxy');
  if (!LOOPBACK.has(req.socket.remoteAddress ?? '')) throw notLocal('this request came from another machine');
  return outboxDir(deps.config.dataDir);
}

/** The project pages' outbox: 404 unless the service runs in outbox mode. */
function projectOutboxDir(deps: AppDeps): string {
  if (!deps.config.outbox) {
    throw new AppError(404, 'OUTBOX_NOT_FOUND', 'This service sends mail through SMTP_URL: it has no outbox', {
      suggestion: 'The outbox exists only in outbox mode (no SMTP_URL); follow sent mail with GET /emails/:id and GET /activity.',
    });
  }
  return outboxDir(deps.config.dataDir);
}

const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width"><title>${escapeHtml(title)}</title><style>
body{font-family:system-ui,sans-serif;max-width:64rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
iframe{width:100%;height:32rem;border:1px solid #ccc}pre{white-space:pre-wrap;background:#f5f5f5;padding:.75rem}
.muted{color:#666}</style></head><body>${body}</body></html>`;

const e = escapeHtml;

function listPage(items: Awaited<ReturnType<typeof listOutbox>>): string {
  const rows = items
    .map(
      (m) =>
        `<tr><td>${e(m.date)}</td><td><a href="/outbox/${encodeURIComponent(m.id)}">${e(m.subject || '(no subject)')}</a></td>` +
        `<td>${e(m.to)}</td><td>${e(m.from)}</td><td>${m.dkim ? `signed ${e(m.dkim)}` : '<span class="muted">unsigned</span>'}</td></tr>`,
    )
    .join('');
  return page(
    'Outbox',
    `<h1>Outbox</h1><p class="muted">No SMTP_URL is configured, so mail is written here instead of being sent. Newest first.</p>` +
      (items.length
        ? `<table><tr><th>Date</th><th>Subject</th><th>To</th><th>From</th><th>DKIM</th></tr>${rows}</table>`
        : '<p>Nothing has been sent yet.</p>'),
  );
}

function messagePage(m: OutboxMessage): string {
  // srcdoc in a sandbox without allow-scripts: the message renders as a mail client shows it, and
  // nothing in it runs or reaches this origin.
  const html = m.html ? `<h2>HTML</h2><iframe sandbox title="message" srcdoc="${e(m.html)}"></iframe>` : '';
  const text = m.text ? `<h2>Text</h2><pre>${e(m.text)}</pre>` : '';
  const files = m.attachments.length
    ? `<h2>Attachments</h2><ul>${m.attachments.map((a) => `<li>${e(a.filename)} (${e(a.contentType)}, ${a.size} bytes)</li>`).join('')}</ul>`
    : '';
  const headers = m.headers.map(([k, v]) => `<tr><th>${e(k)}</th><td>${e(v)}</td></tr>`).join('');
  return page(
    m.subject,
    `<p><a href="/outbox">← Outbox</a></p><h1>${e(m.subject || '(no subject)')}</h1>` +
      `<p>From ${e(m.from)} to ${e(m.to)}, ${e(m.date)}. ${m.dkim ? `DKIM-signed (${e(m.dkim)}).` : 'Not DKIM-signed.'}</p>` +
      `${html}${text}${files}<h2>Headers</h2><table>${headers}</table>`,
  );
}

/**
 * Outbox mode's mail, for a developer with no mail client: the project's own messages for the
 * dashboard (a member's session or the project's secret key), and every message as local pages.
 */
export function registerOutboxRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/projects/:id/outbox',
    tag: 'Projects',
    summary: "Outbox mode only: the project's own mail written instead of sent, newest first (account mail never shows)",
    errors: { 404: '`OUTBOX_NOT_FOUND`: the service sends through SMTP_URL and has no outbox. `PROJECT_NOT_FOUND`.' },
    auth: 'secret',
    projectParam: 'id',
    params: projectIdParam,
    query: projectOutboxQuery,
    response: outboxPageSchema,
    handler: ({ scope, project, query }) => listProjectOutbox(scope.em, projectOutboxDir(deps), project.id, query),
  });

  api.add({
    method: 'get',
    path: '/projects/:id/outbox/:messageId',
    tag: 'Projects',
    summary: "Outbox mode only: one of the project's messages with its HTML, text, headers and attachments",
    errors: { 404: "`MESSAGE_NOT_FOUND`: no such message, or another project's. `OUTBOX_NOT_FOUND`: no outbox (SMTP_URL is set)." },
    auth: 'secret',
    projectParam: 'id',
    params: outboxMessageParams,
    response: outboxMessageSchema,
    handler: ({ scope, project, params }) => readProjectOutboxMessage(scope.em, projectOutboxDir(deps), project.id, params.messageId),
  });

  api.add({
    method: 'get',
    path: '/outbox',
    tag: 'Service',
    summary: 'Outbox mode only, from this machine and not through a proxy: all the mail written instead of sent, newest first (HTML)',
    auth: 'none',
    raw: true,
    handler: async ({ req, res }) => {
      const dir = requireLocalOutbox(deps, req);
      res.type('html').send(listPage(await listOutbox(dir)));
    },
  });

  api.add({
    method: 'get',
    path: '/outbox/:id',
    tag: 'Service',
    summary: 'Outbox mode only, from this machine and not through a proxy: one message rendered, with its headers (HTML)',
    auth: 'none',
    raw: true,
    params: z.object({ id: z.string().min(1).max(300) }),
    handler: async ({ req, res, params }) => {
      const dir = requireLocalOutbox(deps, req);
      const message = await readOutboxMessage(dir, params.id);
      if (!message) throw notFound('message');
      res.type('html').send(messagePage(message));
    },
  });
}
