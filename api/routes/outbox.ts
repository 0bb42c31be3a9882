import type { Request } from 'express';
import { z } from 'zod';
import { AppError, notFound } from '../../errors';
import { escapeHtml } from '../../mail/html';
import { listOutbox, type OutboxMessage, outboxDir, readOutboxMessage } from '../../mail/outbox';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * The outbox holds every project's mail, so it is shown only where it is a developer's own: in
 * outbox mode, and to a client on this machine (the socket's address, not X-Forwarded-For).
 */
function requireLocalOutbox(deps: AppDeps, req: Request): string {
  if (!deps.config.outbox) throw notFound('outbox');
  if (!LOOPBACK.has(req.socket.remoteAddress ?? '')) {
    throw new AppError(403, 'FORBIDDEN', 'The outbox is shown only to clients on the machine that runs the service');
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

/** Outbox mode's mail, for a developer with no mail client: a list and each message rendered. */
export function registerOutboxRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/outbox',
    tag: 'Service',
    summary: 'Outbox mode only, from this machine: the mail written instead of sent, newest first (HTML)',
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
    summary: 'Outbox mode only, from this machine: one message rendered, with its headers (HTML)',
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
