import type { Address, OutgoingMessage } from './compose';

/**
 * The common email (an HTML body, nothing else) written straight into one Buffer: what
 * nodemailer's MailComposer would write for it (its header order and transfer encoding; custom
 * header names as the caller spelt them), without its streams. Everything else (a text
 * alternative, attachments, an address or header this module does not vouch for) goes through
 * MailComposer (mail/compose.ts renderMessage).
 */

/** One header field as written: `Name: value`, folded with CRLF + space, no trailing CRLF. */
export interface HeaderField {
  name: string;
  line: string;
}

export interface MessageParts {
  headers: HeaderField[];
  /** Encoded, CRLF line breaks, ending with CRLF. */
  body: Buffer;
}

const CRLF = '\r\n';
const MAX_LINE = 76;
/** `=?UTF-8?Q?…?=` at most this long, as nodemailer writes them. */
const MAX_WORD = 52;
const WORD_OVERHEAD = '=?UTF-8?Q??='.length;

/** An addr-spec that needs neither quoting nor punycode. */
const PLAIN_ADDRESS = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
const HEADER_NAME = /^[!-9;-~]+$/;
/** Fields this module writes itself; a custom header by one of these names takes the MailComposer path. */
const OWN_FIELDS = new Set([
  'from', 'to', 'cc', 'bcc', 'sender', 'reply-to', 'subject', 'message-id', 'date', 'mime-version',
  'content-type', 'content-transfer-encoding', 'dkim-signature', 'return-path',
]);
const LINE_BREAKS = /\r\n|\r|\n/g;

/** The parts of an HTML-only message, or undefined when it needs MailComposer. */
export function htmlOnlyMessage(message: OutgoingMessage, date = new Date()): MessageParts | undefined {
  if (message.text !== undefined || message.attachments.length > 0 || !message.html) return undefined;
  if (!PLAIN_ADDRESS.test(message.from.address) || !PLAIN_ADDRESS.test(message.to.address)) return undefined;
  if (message.replyTo !== undefined && !PLAIN_ADDRESS.test(message.replyTo)) return undefined;
  const custom = Object.entries(message.headers);
  if (custom.some(([name]) => !HEADER_NAME.test(name) || OWN_FIELDS.has(name.toLowerCase()))) return undefined;

  const html = Buffer.from(message.html, 'utf8');
  const encoding = transferEncoding(html);
  const headers: HeaderField[] = [];
  const add = (name: string, line: string) => headers.push({ name, line });
  // MailComposer's order: custom headers, then the ones it sets, then the ones the root node adds.
  for (const [name, value] of custom) {
    const text = unstructured(value);
    if (text.trim()) add(name, fold(`${name}: ${text}`));
  }
  add('From', `From: ${mailbox(message.from)}`);
  add('To', `To: ${mailbox(message.to)}`);
  if (message.replyTo) add('Reply-To', `Reply-To: ${message.replyTo}`);
  const subject = unstructured(message.subject);
  if (subject.trim()) add('Subject', fold(`Subject: ${subject}`));
  add('Message-ID', `Message-ID: ${message.messageId}`);
  add('Content-Transfer-Encoding', `Content-Transfer-Encoding: ${encoding}`);
  add('Date', `Date: ${date.toUTCString().replace(/GMT/, '+0000')}`);
  add('MIME-Version', 'MIME-Version: 1.0');
  add('Content-Type', 'Content-Type: text/html; charset=utf-8');

  const body = encoding === 'quoted-printable' ? quotedPrintable(html) : encoding === 'base64' ? base64Lines(withCrlf(html)) : withFinalLineBreak(withCrlf(html));
  return { headers, body };
}

/** Headers, an optional field before them (DKIM-Signature), the blank line and the body. */
export function serializeMessage(parts: MessageParts, first?: string): Buffer {
  const head = (first ? first + CRLF : '') + parts.headers.map((h) => h.line + CRLF).join('') + CRLF;
  return Buffer.concat([Buffer.from(head, 'latin1'), parts.body]);
}

// Byte classes for choosing the transfer encoding: Latin letters, and what counts against
// quoted-printable (a control character, the first byte of a non-ASCII character).
const LATIN = 1;
const OTHER = 2;
const BYTE_CLASS = new Uint8Array(256).map((_, b) =>
  (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) ? LATIN : (b < 0x20 && b !== 9 && b !== 10 && b !== 13) || b >= 0xc0 ? OTHER : 0,
);

// nodemailer's choice, so either path encodes the same body alike: 7bit when it is short-lined
// ASCII, quoted-printable while Latin letters outnumber the rest (readable), base64 otherwise.
function transferEncoding(bytes: Buffer): '7bit' | 'quoted-printable' | 'base64' {
  let latin = 0;
  let other = 0;
  let lineStart = 0;
  let longLines = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 10 || b === 13) lineStart = i + 1;
    else if (i - lineStart >= MAX_LINE) longLines = true;
    const c = BYTE_CLASS[b];
    if (c === LATIN) latin += 1;
    else if (c === OTHER) other += 1;
  }
  if (other === 0 && !longLines) return '7bit';
  return other < latin ? 'quoted-printable' : 'base64';
}

const HEX = '0123456789ABCDEF';
const EQ = 0x3d;
/** Bytes quoted-printable writes as they are anywhere on a line. */
const QP_LITERAL = new Uint8Array(256).map((_, b) => (b > 32 && b < 127 && b !== EQ ? 1 : 0));

/**
 * RFC 2045 quoted-printable of text: CR, LF and CRLF all end a line (as they do once sent over
 * SMTP), lines of at most 76 characters, an escape or a UTF-8 character never split by a soft
 * break, whitespace at a line's end escaped.
 */
function quotedPrintable(input: Buffer): Buffer {
  const n = input.length;
  const out = Buffer.allocUnsafe(n * 3 + Math.ceil((n * 3) / 70) * 3 + 2 * n + 2);
  let o = 0;
  let col = 0;
  const softBreak = () => {
    out[o++] = EQ;
    out[o++] = 13;
    out[o++] = 10;
    col = 0;
  };
  let i = 0;
  while (i < n) {
    const b = input[i]!;
    if (b === 13 || b === 10) {
      out[o++] = 13;
      out[o++] = 10;
      col = 0;
      i += b === 13 && input[i + 1] === 10 ? 2 : 1;
      continue;
    }
    if (QP_LITERAL[b] === 1) {
      // Column 75 is left for the `=` of a soft break, unless this character ends the line.
      if (col >= MAX_LINE - 1) {
        const next = i + 1 < n ? input[i + 1]! : 10;
        if (col > MAX_LINE - 1 || (next !== 13 && next !== 10)) softBreak();
      }
      out[o++] = b;
      col += 1;
      i += 1;
      continue;
    }
    // How many bytes go together, and how wide they are once written.
    let take = 1;
    if (b >= 0xc0 && b < 0xf8) {
      take = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
      while (take > 1 && (i + take > n || (input[i + take - 1]! & 0xc0) !== 0x80)) take -= 1;
    }
    const after = i + take < n ? input[i + take]! : 10;
    const endsLine = after === 13 || after === 10;
    const literal = (b === 32 || b === 9) && !endsLine;
    const width = literal ? 1 : take * 3;
    if (col + width > (endsLine ? MAX_LINE : MAX_LINE - 1)) softBreak();
    if (literal) out[o++] = b;
    else
      for (let k = i; k < i + take; k++) {
        const x = input[k]!;
        out[o++] = EQ;
        out[o++] = HEX.charCodeAt(x >> 4);
        out[o++] = HEX.charCodeAt(x & 15);
      }
    col += width;
    i += take;
  }
  if (col > 0) {
    out[o++] = 13;
    out[o++] = 10;
  }
  return out.subarray(0, o);
}

function base64Lines(input: Buffer): Buffer {
  const encoded = input.toString('base64');
  let text = '';
  for (let i = 0; i < encoded.length; i += MAX_LINE) text += encoded.slice(i, i + MAX_LINE) + CRLF;
  return Buffer.from(text, 'latin1');
}

function withFinalLineBreak(body: Buffer): Buffer {
  const n = body.length;
  return n === 0 || (body[n - 2] === 13 && body[n - 1] === 10) ? body : Buffer.concat([body, Buffer.from(CRLF)]);
}

/** Lone CR and lone LF as CRLF, as nodemailer's SMTP client sends them. */
export function withCrlf(raw: Buffer): Buffer {
  const n = raw.length;
  let lone = 0;
  for (let i = 0; i < n; i++) {
    const b = raw[i]!;
    if (b === 13) {
      if (raw[i + 1] === 10) i += 1;
      else lone += 1;
    } else if (b === 10) lone += 1;
  }
  if (lone === 0) return raw;
  const out = Buffer.allocUnsafe(n + lone);
  let o = 0;
  for (let i = 0; i < n; i++) {
    const b = raw[i]!;
    if (b === 13 || b === 10) {
      out[o++] = 13;
      out[o++] = 10;
      if (b === 13 && raw[i + 1] === 10) i += 1;
    } else out[o++] = b;
  }
  return out;
}

/** A header value as it may stand: one line, encoded words when it is not plain printable ASCII. */
function unstructured(value: string): string {
  const line = value.replace(LINE_BREAKS, ' ');
  // `=?` in plain text would be decoded by the reader as if it were an encoded word.
  return /^[\t\x20-\x7e]*$/.test(line) && !line.includes('=?') ? line : encodedWords(line);
}

function mailbox(a: Address): string {
  const name = a.name ?? '';
  if (!name) return a.address;
  if (/^[\w ]*$/.test(name)) return `${name} <${a.address}>`;
  if (/^[\x20-\x7e]*$/.test(name) && !name.includes('=?')) return `"${name.replace(/["\\]/g, '\\$&')}" <${a.address}>`;
  return `${encodedWords(name)} <${a.address}>`;
}

/**
 * RFC 2047 encoded words for the whole value (as nodemailer does: some readers drop the space
 * between a plain and an encoded word), one folded line each, never splitting a character.
 * Q while Latin letters outnumber the rest, B otherwise.
 */
function encodedWords(value: string): string {
  let latin = 0;
  let other = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 9) || c >= 0x80) other += 1;
    else if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) latin += 1;
  }
  const room = MAX_WORD - WORD_OVERHEAD;
  const words: string[] = [];
  if (other < latin) {
    let word = '';
    for (const ch of value) {
      const piece = qEncode(ch);
      if (word.length + piece.length > room) {
        words.push(`=?UTF-8?Q?${word}?=`);
        word = '';
      }
      word += piece;
    }
    words.push(`=?UTF-8?Q?${word}?=`);
  } else {
    // Base64 of at most this many bytes fits the room.
    const maxBytes = Math.floor(room / 4) * 3;
    let chunk: string[] = [];
    let bytes = 0;
    const flush = () => words.push(`=?UTF-8?B?${Buffer.from(chunk.join(''), 'utf8').toString('base64')}?=`);
    for (const ch of value) {
      const size = Buffer.byteLength(ch, 'utf8');
      if (bytes + size > maxBytes) {
        flush();
        chunk = [];
        bytes = 0;
      }
      chunk.push(ch);
      bytes += size;
    }
    flush();
  }
  return words.join(`${CRLF} `);
}

// RFC 2047 5(3)'s set, valid in a display name and in unstructured text alike.
const Q_LITERAL = /[A-Za-z0-9!*+\-/]/;

function qEncode(ch: string): string {
  if (ch === ' ') return '_';
  if (Q_LITERAL.test(ch)) return ch;
  let out = '';
  for (const b of Buffer.from(ch, 'utf8')) out += `=${HEX[b >> 4]}${HEX[b & 15]}`;
  return out;
}

/**
 * Folds a field at whitespace so its lines stay within 76 characters where the value allows;
 * a run with no whitespace (a long URL) stays on one line. Lines already folded (encoded words)
 * are kept.
 */
function fold(line: string): string {
  if (line.length <= MAX_LINE || line.includes(CRLF)) return line;
  const lines: string[] = [];
  let rest = line;
  // Never fold right after `Name:`: the first line keeps some of the value.
  let minBreak = line.indexOf(':') + 2;
  while (rest.length > MAX_LINE) {
    // A continuation line of whitespace only is not allowed: no break inside trailing whitespace.
    const maxBreak = rest.trimEnd().length - 1;
    let at = -1;
    for (let i = Math.min(MAX_LINE, maxBreak); i > minBreak; i--) {
      const c = rest.charCodeAt(i);
      if (c === 32 || c === 9) {
        at = i;
        break;
      }
    }
    if (at < 0) {
      for (let i = MAX_LINE + 1; i < maxBreak; i++) {
        const c = rest.charCodeAt(i);
        if (c === 32 || c === 9) {
          at = i;
          break;
        }
      }
      if (at < 0) break;
    }
    lines.push(rest.slice(0, at));
    rest = rest.slice(at);
    minBreak = 1;
  }
  lines.push(rest);
  return lines.join(CRLF);
}
