/** Text made safe to place in HTML, in element content and in quoted attribute values alike. */
export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Adds `snippet` at the end of the document's content: before its last `</body>`, or at the end. */
export function appendToBody(html: string, snippet: string): string {
  const bodyEnd = html.search(/<\/body\s*>(?![\s\S]*<\/body\s*>)/i);
  return bodyEnd < 0 ? `${html}${snippet}` : `${html.slice(0, bodyEnd)}${snippet}${html.slice(bodyEnd)}`;
}
