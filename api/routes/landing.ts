import { escapeHtml } from '../../mail/html';
import type { AppDeps } from '../context';
import { htmlPage } from '../html-page';
import type { RouteRegistry } from '../routing';

/** What someone opening the server's address in a browser is looking for, one link each. */
export function registerLandingRoutes(api: RouteRegistry, deps: AppDeps): void {
  const { config } = deps;
  const links: Array<[href: string, label: string, note: string]> = [
    ['/docs', 'API reference', 'getting started, every endpoint, examples'],
    ['/openapi.json', 'OpenAPI document', 'OpenAPI 3.1, for client generators'],
    ['/health', 'Health check', 'database and Temporal connectivity'],
  ];
  if (config.temporal.uiUrl) links.push([config.temporal.uiUrl, 'Temporal Web UI', 'workflow executions, their history and search']);
  // Behind a proxy (TRUST_PROXY set) the local outbox pages refuse everyone: the dashboard shows each project its own.
  if (config.outbox && !config.trustProxySet) {
    links.push(['/outbox', 'Outbox', "no SMTP relay is configured: mail is written here instead of being sent (from this machine only, not through a proxy; a project's own mail is also in the dashboard's Outbox)"]);
  }
  const items = links
    .map(([href, label, note]) => `<li><a href="${escapeHtml(href)}">${escapeHtml(label)}</a>: ${escapeHtml(note)}</li>`)
    .join('');
  const page = htmlPage(
    'Tidings',
    `<p>Transactional email, contacts, events, templates, campaigns and workflows over an HTTP API.</p><ul>${items}</ul>`,
    'li{margin:.4rem 0}',
  );

  api.add({
    method: 'get',
    path: '/',
    tag: 'Service',
    summary: 'Landing page (HTML): links to the reference, the OpenAPI document, the health check and the local tools',
    auth: 'none',
    raw: true,
    handler: ({ res }) => {
      res.type('html').send(page);
    },
  });
}
