import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { type AddressObject, simpleParser } from 'mailparser';

/**
 * The outbox: with no SMTP_URL, mail is written here as .eml files (mail/transport.ts) instead of
 * being sent, so a first send works on a laptop with no relay and no DNS.
 */
export const outboxDir = (dataDir: string) => path.resolve(dataDir, 'outbox');

export const outboxNotice = (publicUrl: string) =>
  `Outbox mode (no SMTP_URL): written to the local outbox, nothing left this machine. Read it at ${publicUrl}/outbox`;

/** A message's id in the outbox: its file name without `.eml` (derived from the Message-ID). */
const ID = /^[\w.-]{1,200}$/;
const NO_SUCH_FILE = new Set(['ENOENT', 'ENAMETOOLONG', 'EISDIR']);

export interface OutboxSummary {
  id: string;
  from: string;
  to: string;
  subject: string;
  date: string;
  /** `d=<domain> s=<selector>` of the DKIM-Signature header, when signed. */
  dkim: string | undefined;
}

export interface OutboxMessage extends OutboxSummary {
  html: string | undefined;
  text: string | undefined;
  headers: [string, string][];
  attachments: { filename: string; contentType: string; size: number }[];
}

const addresses = (a: AddressObject | AddressObject[] | undefined) => [a ?? []].flat().map((x) => x.text).join(', ');

function dkimOf(raw: string): string | undefined {
  const header = /^DKIM-Signature:((?:.*\r?\n[ \t].*)*.*)/im.exec(raw)?.[1];
  if (!header) return undefined;
  const tag = (name: string) => new RegExp(`(?:^|;)\\s*${name}=([^;]+)`).exec(header.replace(/\s+/g, ' '))?.[1]?.trim();
  return `d=${tag('d') ?? '?'} s=${tag('s') ?? '?'}`;
}

async function parse(dir: string, id: string): Promise<OutboxMessage> {
  const raw = await readFile(path.join(dir, `${id}.eml`), 'utf8');
  const mail = await simpleParser(raw);
  return {
    id,
    from: addresses(mail.from),
    to: addresses(mail.to),
    subject: mail.subject ?? '',
    date: (mail.date ?? new Date(0)).toISOString(),
    dkim: dkimOf(raw.slice(0, raw.search(/\r?\n\r?\n/))),
    html: mail.html === false ? undefined : mail.html,
    text: mail.text,
    headers: mail.headerLines.map((h) => [h.key, h.line.slice(h.line.indexOf(':') + 1).trim()]),
    attachments: mail.attachments.map((a) => ({ filename: a.filename ?? '(unnamed)', contentType: a.contentType, size: a.size })),
  };
}

/** The newest `limit` messages first; only their headers matter here, but parsing is cheap at this size. */
export async function listOutbox(dir: string, limit = 100): Promise<OutboxSummary[]> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.eml'));
  const dated = await Promise.all(names.map(async (n) => ({ n, t: (await stat(path.join(dir, n))).mtimeMs })));
  const newest = dated.sort((a, b) => b.t - a.t).slice(0, limit);
  return Promise.all(
    newest.map(async ({ n }) => {
      const { html: _h, text: _t, headers: _hd, attachments: _a, ...summary } = await parse(dir, n.slice(0, -4));
      return summary;
    }),
  );
}

/** One message, or undefined for an id that names no file (or tries to leave the folder). */
export async function readOutboxMessage(dir: string, id: string): Promise<OutboxMessage | undefined> {
  if (!ID.test(id)) return undefined;
  return parse(dir, id).catch((err: NodeJS.ErrnoException) => {
    if (NO_SUCH_FILE.has(err.code ?? '')) return undefined;
    throw err;
  });
}
