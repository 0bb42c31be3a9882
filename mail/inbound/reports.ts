/**
 * What a received message reports about mail we sent: a DSN (RFC 3464, `multipart/report;
 * report-type=delivery-status`), a complaint (ARF, RFC 5965, `report-type=feedback-report`), or
 * nothing. Reports are machine-written and flat (the report type at the top, its parts one level
 * down), so they are read here directly: a general parser folds the status part into the body text.
 */

export type InboundReport =
  | {
      kind: 'bounce';
      bounceType: 'hard' | 'soft';
      /** The enhanced status code (`5.1.1`), when the report gave one. */
      status?: string;
      diagnostic?: string;
      /** Message-ID of the message that bounced, from the copy or headers the report returns. */
      originalMessageId?: string;
    }
  | { kind: 'complaint'; feedbackType: string; originalMessageId?: string }
  /** A report that asks for nothing: a success DSN, a `not-spam` feedback report. */
  | { kind: 'other-report' }
  | { kind: 'none' };

type Fields = Map<string, string>;

/** Header block → fields (names lower-cased, folded lines joined; the first of a repeated name wins). */
function parseFields(block: string): Fields {
  const fields: Fields = new Map();
  let last: string | undefined;
  for (const line of block.split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && last !== undefined) {
      fields.set(last, `${fields.get(last)!} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    last = line.slice(0, colon).trim().toLowerCase();
    if (fields.has(last)) last = undefined;
    else fields.set(last, line.slice(colon + 1).trim());
  }
  return fields;
}

/** A MIME entity → its header fields and body. */
function splitEntity(text: string): { headers: Fields; body: string } {
  const match = /\r?\n\r?\n/.exec(text);
  if (!match) return { headers: parseFields(text), body: '' };
  return { headers: parseFields(text.slice(0, match.index)), body: text.slice(match.index + match[0].length) };
}

/** `type/subtype; a=b; c="d"` → the type, lower-cased, and its parameters (names lower-cased). */
function contentType(value: string | undefined): { type: string; params: Map<string, string> } {
  const params = new Map<string, string>();
  if (!value) return { type: 'text/plain', params };
  const semi = value.indexOf(';');
  const type = (semi < 0 ? value : value.slice(0, semi)).trim().toLowerCase();
  const re = /;\s*([^=\s;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)/g;
  for (const m of value.matchAll(re)) params.set(m[1]!.toLowerCase(), m[2]!.replace(/^"(.*)"$/, '$1').replace(/\\(.)/g, '$1'));
  return { type, params };
}

function decodeBody(body: string, encoding: string | undefined): string {
  switch (encoding?.trim().toLowerCase()) {
    case 'base64':
      return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
    case 'quoted-printable':
      return body.replace(/=\r?\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
    default:
      return body;
  }
}

/** The parts of a multipart body (not descended into), decoded. */
function multipartParts(body: string, boundary: string): { type: string; headers: Fields; body: string }[] {
  const delimiter = `--${boundary}`;
  const parts: { type: string; headers: Fields; body: string }[] = [];
  // A delimiter line is the boundary alone (or closing with "--"), so a longer inner boundary that starts the same does not cut.
  const escaped = delimiter.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const chunks = body.split(new RegExp(`(?:^|\\r?\\n)${escaped}(?=--|[ \\t]*(?:\\r?\\n|$))`));
  // chunks[0] is the preamble; a chunk starting with "--" is the closing delimiter's epilogue.
  for (const chunk of chunks.slice(1)) {
    if (chunk.startsWith('--')) break;
    const entity = splitEntity(chunk.replace(/^[ \t]*\r?\n/, ''));
    parts.push({ type: contentType(entity.headers.get('content-type')).type, headers: entity.headers, body: decodeBody(entity.body, entity.headers.get('content-transfer-encoding')) });
  }
  return parts;
}

/** The per-recipient groups of a delivery-status part (the first group is about the message). */
function recipientGroups(status: string): Fields[] {
  return status
    .split(/\r?\n[ \t]*\r?\n/)
    .map(parseFields)
    .filter((f) => f.has('action'));
}

const STATUS = /^([245])\.\d{1,3}\.\d{1,3}/;

function bounceFrom(groups: Fields[]): InboundReport {
  // The worst of the recipients: a failure before a delay; with VERP there is one recipient.
  const failed = groups.find((g) => g.get('action')!.toLowerCase() === 'failed');
  const chosen = failed ?? groups.find((g) => g.get('action')!.toLowerCase() === 'delayed');
  if (!chosen) return { kind: 'other-report' };
  const status = STATUS.exec(chosen.get('status') ?? '')?.[0];
  // Permanent only when the reporting MTA gave up on a permanent status; 4.x.x, even given up on, may pass another day.
  const hard = failed !== undefined && (status === undefined || status.startsWith('5'));
  const diagnostic = chosen.get('diagnostic-code');
  return { kind: 'bounce', bounceType: hard ? 'hard' : 'soft', ...(status ? { status } : {}), ...(diagnostic ? { diagnostic } : {}) };
}

/** Feedback types that mean "the recipient did not want this" (RFC 5965 3.1); not-spam and auth-failure do not. */
const COMPLAINT_TYPES = new Set(['abuse', 'fraud', 'virus']);

/** The Message-ID of the original message a report returns (whole, or its headers). */
function originalMessageId(parts: { type: string; body: string }[]): string | undefined {
  const original = parts.find((p) => ['message/rfc822', 'text/rfc822-headers', 'message/rfc822-headers', 'message/global', 'message/global-headers'].includes(p.type));
  return original && splitEntity(original.body).headers.get('message-id');
}

export function readReport(raw: Buffer): InboundReport {
  const { headers, body } = splitEntity(raw.toString('utf8'));
  const top = contentType(headers.get('content-type'));
  if (top.type === 'multipart/report' && top.params.get('boundary')) {
    const parts = multipartParts(body, top.params.get('boundary')!);
    const reportType = top.params.get('report-type')?.toLowerCase();
    const originalId = originalMessageId(parts);
    const withOriginal = <T extends object>(r: T) => (originalId ? { ...r, originalMessageId: originalId } : r);
    if (reportType === 'delivery-status') {
      const status = parts.find((p) => p.type === 'message/delivery-status' || p.type === 'message/global-delivery-status');
      if (!status) return { kind: 'other-report' };
      const report = bounceFrom(recipientGroups(status.body));
      return report.kind === 'bounce' ? withOriginal(report) : report;
    }
    if (reportType === 'feedback-report') {
      const feedback = parts.find((p) => p.type === 'message/feedback-report');
      const feedbackType = feedback && parseFields(feedback.body).get('feedback-type')?.toLowerCase();
      if (!feedbackType || !COMPLAINT_TYPES.has(feedbackType)) return { kind: 'other-report' };
      return withOriginal({ kind: 'complaint' as const, feedbackType });
    }
    return { kind: 'other-report' };
  }
  // Exim's plain-text bounce ("Mail delivery failed: returning message to sender") names the
  // recipients it gave up on in a header of its own, and is sent only for permanent failures.
  if (headers.has('x-failed-recipients')) return { kind: 'bounce', bounceType: 'hard' };
  return { kind: 'none' };
}
