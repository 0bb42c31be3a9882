/**
 * Markdown bodies (`type: "markdown"` on /v1/send) become an HTML template once per send, before
 * Handlebars compiles them. A contact's values are then substituted into finished HTML, where
 * Handlebars escapes them like in any HTML body, and nothing in them is ever read as Markdown: a
 * `*`, `#` or `<` in a name stays text.
 *
 * markdown-it would mangle the Handlebars tags themselves: it escapes the quotes of
 * `{{a ?? "b"}}`, percent-encodes `[x]({{unsubscribeUrl}})` into `%7B%7B…`, and takes the
 * backslash of `\{{` as its own escape. So each tag is swapped for an inert placeholder (letters
 * and digits, which Markdown leaves alone in text and in URLs alike) while markdown-it runs, and
 * put back byte for byte afterwards.
 *
 * A block tag on a line of its own becomes a paragraph of its own (`<p>{{#if x}}</p>`), which
 * renders as an empty paragraph; loops that build lists read better written in HTML.
 */
import { randomBytes } from 'node:crypto';
import MarkdownIt from 'markdown-it';

// Raw HTML passes through (as in the client's Markdown mode); bare URLs become links; quotes and
// dashes stay as typed (typographer off, the default).
const md = new MarkdownIt({ html: true, linkify: true });

export function markdownToHtmlTemplate(source: string): string {
  const tags = handlebarsTags(source);
  if (tags.length === 0) return md.render(source);
  const marker = markerNotIn(source);
  let masked = '';
  let at = 0;
  tags.forEach(([start, end], i) => {
    masked += `${source.slice(at, start)}${marker}${i}${marker}`;
    at = end;
  });
  masked += source.slice(at);
  return md.render(masked).replace(new RegExp(`${marker}(\\d+)${marker}`, 'g'), (whole, i: string) => {
    const tag = tags[Number(i)];
    return tag ? source.slice(tag[0], tag[1]) : whole;
  });
}

/** Letters and digits that occur nowhere in the source, so a placeholder can't be mistaken for text. */
function markerNotIn(source: string): string {
  for (;;) {
    const marker = `hb${randomBytes(6).toString('hex')}x`;
    if (!source.includes(marker)) return marker;
  }
}

/**
 * [start, end) of every Handlebars tag, found as Handlebars' lexer finds them: `{{…}}` (strings and
 * `[…]` segments may hold `}}`), `{{{…}}}`, comments `{{!…}}` and `{{!--…--}}`, raw blocks
 * `{{{{x}}}}…{{{{/x}}}}` whole, `\{{` (an escaped, literal `{{`: only the escape is kept from
 * Markdown) and `\\{{…}}` (a literal backslash, then a tag). An unclosed tag runs to the end; the
 * compiler reports it.
 */
function handlebarsTags(src: string): [number, number][] {
  const tags: [number, number][] = [];
  const endOf = (re: RegExp, from: number) => {
    re.lastIndex = from;
    const m = re.exec(src);
    return m ? m.index + m[0].length : src.length;
  };
  let i = 0;
  for (;;) {
    const open = src.indexOf('{{', i);
    if (open < 0) return tags;
    const escapes = src[open - 1] === '\\' ? (src[open - 2] === '\\' ? 2 : 1) : 0;
    if (escapes === 1) {
      tags.push([open - 1, open + 2]);
      i = open + 2;
      continue;
    }
    let end: number;
    const comment = /^\{\{~?!(--)?/.exec(src.slice(open, open + 6));
    if (comment) {
      end = comment[1] ? endOf(/--~?\}\}/g, open + comment[0].length) : endOf(/\}\}/g, open);
    } else if (src.startsWith('{{{{', open)) {
      const close = src.indexOf('{{{{/', open + 4);
      end = close < 0 ? src.length : endOf(/\}\}\}\}/g, close);
    } else {
      end = open + 2;
      while (end < src.length && !(src[end] === '}' && src[end + 1] === '}')) {
        const c = src[end]!;
        if (c === '"' || c === "'") end = endOf(c === '"' ? /"(?:\\"|[^"])*"/y : /'(?:\\'|[^'])*'/y, end);
        else if (c === '[') end = endOf(/\[(?:\\\]|[^\]])*\]/y, end);
        else end += 1;
      }
      end = Math.min(end + 2, src.length);
      if (src.startsWith('{{{', open) && src[end] === '}') end += 1;
    }
    tags.push([open - escapes, end]);
    i = end;
  }
}
