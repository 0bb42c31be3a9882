import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { type AddressObject, simpleParser } from 'mailparser';

/**
 * The outbox: with no SMTP_URL, mail is written here as .eml files (mail/transport.ts) instead of
 * being sent, so a first send works on a laptop with no relay and no DNS.
 */
export const outboxDir = (dataDir: string) => path.resolve(dataDir, 'outbox');

export const outboxNotice = (publicUrl: string) =>
  `Outbox mode (no SMTP_URL): written to the local outbox, nothing left this machine. Read it in the dashboard's Outbox (${publicUrl}/app) or, from this machine, at ${publicUrl}/outbox`;

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

/** An outbox file as listed, before it is read. */
export interface OutboxEntry {
  id: string;
  /** When the file was written (ms since the epoch). */
  writtenAt: number;
  /** The project email it was built from; undefined for account mail, which belongs to no project. */
  emailId: string | undefined;
}

/**
 * The writer names each file after the Message-ID with `<`, `>` and `@` made `_` (mail/transport.ts),
 * and a project email's Message-ID is `<its uuid@sending domain>` (mail/compose.ts). Account mail's
 * ids are `sml_…`, never a UUID. The name comes from the composed message, never from a header a
 * sender chose, so it names the email reliably.
 */
const EMAIL_FILE = /^_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_/;

export const emailIdOfOutboxMessage = (id: string): string | undefined => EMAIL_FILE.exec(id)?.[1];

/** Every message in the folder, the last written first. */
export async function outboxEntries(dir: string): Promise<OutboxEntry[]> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.eml'));
  const entries = await Promise.all(
    names.map(async (name) => {
      const id = name.slice(0, -4);
      const written = await stat(path.join(dir, name)).catch(() => undefined);
      return written && { id, writtenAt: written.mtimeMs, emailId: emailIdOfOutboxMessage(id) };
    }),
  );
  return entries
    .filter((e): e is OutboxEntry => e !== undefined)
    .sort((a, b) => b.writtenAt - a.writtenAt);
}

/** A message's headers only; undefined when its file is gone. */
export async function readOutboxSummary(dir: string, id: string): Promise<OutboxSummary | undefined> {
  const message = await readOutboxMessage(dir, id);
  if (!message) return undefined;
  const { html: _h, text: _t, headers: _hd, attachments: _a, ...summary } = message;
  return summary;
}

/** The newest `limit` messages first; only their headers matter here, but parsing is cheap at this size. */
export async function listOutbox(dir: string, limit = 100): Promise<OutboxSummary[]> {
  const newest = (await outboxEntries(dir)).slice(0, limit);
  const summaries = await Promise.all(newest.map((e) => readOutboxSummary(dir, e.id)));
  return summaries.filter((s): s is OutboxSummary => s !== undefined);
}

/** One message, or undefined for an id that names no file (or tries to leave the folder). */
export async function readOutboxMessage(dir: string, id: string): Promise<OutboxMessage | undefined> {
  if (!ID.test(id)) return undefined;
  return parse(dir, id).catch((err: NodeJS.ErrnoException) => {
    if (NO_SUCH_FILE.has(err.code ?? '')) return undefined;
    throw err;
  });
}
