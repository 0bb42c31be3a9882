import { createHmac, timingSafeEqual } from 'node:crypto';
import { appendToBody } from './html';

/**
 * Open and click tracking (engagement, recorded by db/messages/engagement.ts; not the events a
 * client tracks with `POST /v1/track`): the HTML rewriting done when an email is rendered, and the
 * signed tokens the tracking endpoints (`GET /t/o/:token`, `GET /t/c/:token`) read back.
 *
 * A token is `<payload>.<mac>`, both base64url. The payload is the email id's 16 bytes, followed
 * for a click by the target URL in UTF-8; the MAC is HMAC-SHA256 over the purpose and the payload,
 * truncated to 128 bits (plenty against forgery, and links stay short). Nothing is looked up to
 * verify a token, and a click token redirects only to the URL it was signed for: there is no
 * open redirect to abuse, and a tampered URL is a 404.
 */

type Purpose = 'open' | 'click';

const MAC_BYTES = 16;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A key of its own, derived from the link secret: tracking tokens are never valid as contact links. */
const keys = new Map<string, Buffer>();
function trackingKey(linkSecret: string): Buffer {
  let key = keys.get(linkSecret);
  if (!key) {
    key = createHmac('sha256', linkSecret).update('tidings:tracking').digest();
    if (keys.size > 16) keys.clear();
    keys.set(linkSecret, key);
  }
  return key;
}

const mac = (linkSecret: string, purpose: Purpose, payload: Buffer) =>
  createHmac('sha256', trackingKey(linkSecret)).update(`${purpose}\0`).update(payload).digest().subarray(0, MAC_BYTES);

const uuidBytes = (emailId: string) => Buffer.from(emailId.replace(/-/g, ''), 'hex');
const uuidString = (bytes: Buffer) => {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

function sign(linkSecret: string, purpose: Purpose, emailId: string, url?: string): string {
  if (!UUID.test(emailId)) throw new Error(`Not an email id: ${emailId}`);
  const payload = Buffer.concat([uuidBytes(emailId), Buffer.from(url ?? '', 'utf8')]);
  return `${payload.toString('base64url')}.${mac(linkSecret, purpose, payload).toString('base64url')}`;
}

/** The payload of a token signed for this purpose by this instance, or null. */
function verify(linkSecret: string, purpose: Purpose, token: string): Buffer | null {
  const parts = token.split('.');
  if (parts.length !== 2) return null;
  const [payloadPart, macPart] = parts as [string, string];
  const payload = Buffer.from(payloadPart, 'base64url');
  // Only the exact form sign() makes: the decoder skips characters it does not know.
  if (payload.length < 16 || payload.toString('base64url') !== payloadPart) return null;
  const given = Buffer.from(macPart, 'base64url');
  if (given.length !== MAC_BYTES || given.toString('base64url') !== macPart) return null;
  return timingSafeEqual(given, mac(linkSecret, purpose, payload)) ? payload : null;
}

export const signOpenToken = (linkSecret: string, emailId: string) => sign(linkSecret, 'open', emailId);
export const signClickToken = (linkSecret: string, emailId: string, url: string) => sign(linkSecret, 'click', emailId, url);

/** The email id of a genuine open token, or null. */
export function verifyOpenToken(linkSecret: string, token: string): string | null {
  const payload = verify(linkSecret, 'open', token);
  return payload && payload.length === 16 ? uuidString(payload) : null;
}

/** The email id and target of a genuine click token (an http(s) URL, as signed), or null. */
export function verifyClickToken(linkSecret: string, token: string): { emailId: string; url: string } | null {
  const payload = verify(linkSecret, 'click', token);
  if (!payload) return null;
  const url = payload.subarray(16).toString('utf8');
  return isWebUrl(url) ? { emailId: uuidString(payload.subarray(0, 16)), url } : null;
}

const isWebUrl = (url: string) => /^https?:\/\/[^\s]+$/i.test(url);

export const openPixelUrl = (publicUrl: string, linkSecret: string, emailId: string) =>
  `${publicUrl}/t/o/${signOpenToken(linkSecret, emailId)}`;
export const clickUrl = (publicUrl: string, linkSecret: string, emailId: string, url: string) =>
  `${publicUrl}/t/c/${signClickToken(linkSecret, emailId, url)}`;

/** A transparent 1×1 GIF (43 bytes), what the open pixel answers with. */
export const TRANSPARENT_GIF = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');

const NAMED_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

/** An attribute value as the browser reads it: Handlebars writes `&` as `&amp;`, `=` as `&#x3D;`. */
export function decodeAttribute(value: string): string {
  return value.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED_ENTITIES[ref.toLowerCase()] ?? whole;
  });
}

export interface TrackingOptions {
  publicUrl: string;
  linkSecret: string;
  emailId: string;
}

// An opening <a> tag; quoted attribute values may contain '>'.
const ANCHOR = /<a\b(?:[^>"']|"[^"]*"|'[^']*')*>/gi;
// An unquoted value runs to whitespace or '>', as browsers read it.
const HREF = /(\shref\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s>]+))/i;

/** The targets of the `<a href>` links in the HTML, decoded as the browser reads them. */
export function linkTargets(html: string): string[] {
  return (html.match(ANCHOR) ?? []).flatMap((tag) => {
    const m = HREF.exec(tag);
    return m ? [decodeAttribute(m[2] ?? m[3] ?? m[4] ?? '').trim()] : [];
  });
}

/**
 * Rewrites every `<a href="http(s)://…">` to go through `${publicUrl}/t/c/<token>`, and adds the
 * open pixel before `</body>` (or at the end). Left alone: other schemes (mailto:, tel:, #…), and
 * the service's own pages (unsubscribe / subscribe / manage links and tracking URLs), which must
 * keep working as they are, List-Unsubscribe included.
 */
export function addTracking(html: string, opts: TrackingOptions): string {
  const own = ['/unsubscribe/', '/subscribe/', '/manage/', '/t/'].map((p) => `${opts.publicUrl}${p}`);
  const rewritten = html.replace(ANCHOR, (tag) =>
    tag.replace(HREF, (attr, prefix: string, dq?: string, sq?: string, bare?: string) => {
      const url = decodeAttribute(dq ?? sq ?? bare ?? '').trim();
      if (!isWebUrl(url) || own.some((p) => url.startsWith(p))) return attr;
      return `${prefix}"${clickUrl(opts.publicUrl, opts.linkSecret, opts.emailId, url)}"`;
    }),
  );
  const pixel =
    `<img src="${openPixelUrl(opts.publicUrl, opts.linkSecret, opts.emailId)}" width="1" height="1" alt=""` +
    ` style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" />`;
  return appendToBody(rewritten, pixel);
}
