import { createHash, type KeyObject } from 'node:crypto';
import type { HeaderField, MessageParts } from './mime';
import { rsaSha256 } from './rsa-signer';

/**
 * DKIM signing (RFC 6376: rsa-sha256, relaxed/relaxed) of a message whose bytes are final:
 * CRLF line breaks throughout, as they go over SMTP. Key generation and DNS records are in
 * mail/dkim.ts.
 */

export interface DkimKey {
  domainName: string;
  keySelector: string;
  privateKey: KeyObject;
}

/**
 * The fields signed when present, in this order (h=), the last instance of each: RFC 4871
 * 5.5's list plus List-Unsubscribe-Post, which RFC 8058 wants signed next to List-Unsubscribe.
 * The list nodemailer signs, so signatures read the same whichever path built the message.
 */
const SIGNED_FIELDS = [
  'from', 'sender', 'reply-to', 'subject', 'date', 'message-id', 'to', 'cc', 'mime-version', 'content-type',
  'content-transfer-encoding', 'content-id', 'content-description', 'resent-date', 'resent-from', 'resent-sender',
  'resent-to', 'resent-cc', 'resent-message-id', 'in-reply-to', 'references', 'list-id', 'list-help', 'list-unsubscribe',
  'list-unsubscribe-post', 'list-subscribe', 'list-post', 'list-owner', 'list-archive', 'otp-token',
];

const CRLF = '\r\n';

/** The DKIM-Signature field (folded, no trailing CRLF) for these headers and body. */
export async function dkimSignature(parts: MessageParts, key: DkimKey): Promise<string> {
  const last = new Map<string, HeaderField>();
  for (const h of parts.headers) last.set(h.name.toLowerCase(), h);
  const signed = SIGNED_FIELDS.filter((name) => last.has(name));
  const bodyHash = createHash('sha256').update(relaxedBody(parts.body)).digest('base64');
  const tags = [
    'v=1',
    'a=rsa-sha256',
    'c=relaxed/relaxed',
    `d=${tagValue(key.domainName).toLowerCase()}`,
    'q=dns/txt',
    `s=${tagValue(key.keySelector)}`,
    `bh=${bodyHash}`,
    `h=${signed.join(':')}`,
  ];
  const unsigned = `${foldTags(`DKIM-Signature: ${tags.join('; ')}`)};${CRLF} b=`;
  let data = '';
  for (const name of signed) data += `${name}:${relaxedValue(last.get(name)!.line)}${CRLF}`;
  data += `dkim-signature:${relaxedValue(unsigned)}`;
  const signature = await rsaSha256(Buffer.from(data, 'latin1'), key.privateKey);
  return unsigned + wrapSignature(signature.toString('base64'));
}

/** A built message (MailComposer's) with its DKIM-Signature field in front. */
export async function signMessage(raw: Buffer, key: DkimKey): Promise<Buffer> {
  const parts = splitMessage(raw);
  return Buffer.concat([Buffer.from(`${await dkimSignature(parts, key)}${CRLF}`, 'latin1'), raw]);
}

/** Header fields and body of a message with CRLF line breaks. */
function splitMessage(raw: Buffer): MessageParts {
  const end = raw.indexOf('\r\n\r\n');
  const headerEnd = end < 0 ? raw.length : end;
  const headers: HeaderField[] = [];
  for (const line of raw.toString('latin1', 0, headerEnd).split(CRLF)) {
    const c = line.charCodeAt(0);
    const previous = headers[headers.length - 1];
    if ((c === 32 || c === 9) && previous) previous.line += CRLF + line;
    else if (line) headers.push({ name: line.slice(0, line.indexOf(':')).trim(), line });
  }
  return { headers, body: end < 0 ? Buffer.alloc(0) : raw.subarray(end + 4) };
}

/** RFC 6376 3.4.2: unfolded, whitespace runs as one space, none around the value. */
const relaxedValue = (line: string) =>
  line
    .slice(line.indexOf(':') + 1)
    .replace(/\r\n/g, '')
    .replace(/[ \t]+/g, ' ')
    .replace(/^ | $/g, '');

/**
 * RFC 6376 3.4.4 on bytes: whitespace runs become one space, whitespace before a line break
 * goes, empty lines at the end go, and a non-empty body ends with CRLF.
 */
function relaxedBody(body: Buffer): Buffer {
  const n = body.length;
  const out = Buffer.allocUnsafe(n + 2);
  let o = 0;
  let space = false;
  // Where the output stood after the last line that had content.
  let contentEnd = 0;
  for (let i = 0; i < n; i++) {
    const b = body[i]!;
    if (b === 13 && body[i + 1] === 10) {
      space = false;
      out[o++] = 13;
      out[o++] = 10;
      i += 1;
      continue;
    }
    if (b === 32 || b === 9) {
      space = true;
      continue;
    }
    if (space) {
      out[o++] = 32;
      space = false;
    }
    out[o++] = b;
    contentEnd = o;
  }
  if (contentEnd === 0) return out.subarray(0, 0);
  // Keep the content and the line break that ends it.
  out[contentEnd] = 13;
  out[contentEnd + 1] = 10;
  return out.subarray(0, contentEnd + 2);
}

/** Tag values come from our own rows; nothing in them may end the value or the field. */
const tagValue = (v: string) => v.replace(/[\x00-\x20\x7f;=]/g, '');

/** Folds the tag list at its spaces (FWS is allowed around tags), lines within 76 where possible. */
function foldTags(line: string): string {
  const words = line.split(' ');
  let out = words[0]!;
  let width = out.length;
  for (const word of words.slice(1)) {
    if (width + 1 + word.length > 76) {
      out += `${CRLF} ${word}`;
      width = 1 + word.length;
    } else {
      out += ` ${word}`;
      width += 1 + word.length;
    }
  }
  return out;
}

/** b= continues after ` b=` on the first line, then 75 characters a line. */
function wrapSignature(b64: string): string {
  let out = b64.slice(0, 73);
  for (let i = 73; i < b64.length; i += 75) out += `${CRLF} ${b64.slice(i, i + 75)}`;
  return out;
}
