import { escapeHtml } from '../mail/html';

/** A small self-contained HTML page (the links in mail open these); `css` adds to the base style. */
export function htmlPage(title: string, content: string, css = ''): string {
  return `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
${css}</style></head>
<body><h1>${escapeHtml(title)}</h1>${content}</body></html>`;
}
