import { escapeHtml } from '../mail/html';

type JsonSchema = Record<string, unknown>;

const block = (title: string, value: unknown) =>
  `<details><summary>${escapeHtml(title)}</summary><pre>${escapeHtml(JSON.stringify(value, null, 2))}</pre></details>`;

/** A self-contained reference page (no CDN): the service must document itself offline too. */
export function renderDocsPage(doc: JsonSchema): string {
  const paths = doc.paths as Record<string, Record<string, JsonSchema>>;
  const byTag = new Map<string, string[]>();
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const tag = (op.tags as string[])[0] ?? 'Other';
      const auth = (op.security as unknown[]).length === 0 ? 'no auth' : JSON.stringify(op.security).includes('publicKey') ? 'secret or public key' : 'secret key';
      const params = op.parameters as JsonSchema[];
      const parts = [
        `<h3 id="${escapeHtml(String(op.operationId))}"><span class="m ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>`,
        `<p>${escapeHtml(String(op.summary))} <em>(${auth})</em></p>`,
        params.length ? block('Parameters', params) : '',
        op.requestBody ? block('Request body', (op.requestBody as JsonSchema).content) : '',
        block('Responses', op.responses),
      ];
      (byTag.get(tag) ?? byTag.set(tag, []).get(tag)!).push(`<section>${parts.join('\n')}</section>`);
    }
  }
  const info = doc.info as { title: string; version: string; description: string };
  const toc = [...byTag.keys()].map((t) => `<li><a href="#tag-${escapeHtml(t)}">${escapeHtml(t)}</a></li>`).join('');
  const body = [...byTag.entries()]
    .map(([tag, sections]) => `<h2 id="tag-${escapeHtml(tag)}">${escapeHtml(tag)}</h2>${sections.join('\n')}`)
    .join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(info.title)} reference</title>
<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code,pre{font-family:ui-monospace,monospace}pre{background:#f5f5f5;padding:.75rem;overflow:auto}
.m{display:inline-block;min-width:4.5rem;font-size:.8rem;padding:.1rem .4rem;border-radius:3px;color:#fff;background:#555}
.get{background:#2b6cb0}.post{background:#2f855a}.patch,.put{background:#b7791f}.delete{background:#c53030}
section{border-top:1px solid #ddd;padding:.5rem 0}</style></head><body>
<h1>${escapeHtml(info.title)} <small>${escapeHtml(info.version)}</small></h1><p>${escapeHtml(info.description)}</p>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1). Errors use the envelope in <code>components.schemas.Error</code>.</p>
<ul>${toc}</ul>${body}</body></html>`;
}
