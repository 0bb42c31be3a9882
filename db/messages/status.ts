import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, notFound } from '../../errors';
import type { EmailSource, EmailStatus } from './emails';
import { type CursorPage, decodeCursor, encodeCursor, pageOfRows } from '../paging';
import { query, queryOne } from '../sql';

/**
 * What happened to an email, as an API user asks it (GET /emails/:id, GET /emails): where it is
 * in delivery, how many times it was handed to the relay and what the relay said last, and what
 * the mail infrastructure and its reader did with it since. The body is not part of it: it can be
 * large, and the caller has it.
 */

export interface EmailSummary {
  id: string;
  status: EmailStatus;
  source: EmailSource;
  campaignId: string | null;
  templateId: string | null;
  contactId: string | null;
  to: string;
  subject: string;
  attempts: number;
  error: string | null;
  createdAt: string;
  sentAt: string | null;
  updatedAt: string;
}

export interface EmailDetail extends Omit<EmailSummary, 'contactId'> {
  contact: { id: string; email: string } | null;
  from: string;
  lastAttemptAt: string | null;
  relayResponse: string | null;
  deliveredAt: string | null;
  bouncedAt: string | null;
  bounceType: 'hard' | 'soft' | null;
  complainedAt: string | null;
  opens: { count: number; first: string | null; last: string | null };
  clicks: { count: number; first: string | null; last: string | null; links: { url: string; first: string }[] };
}

type Timestamp = Date | string;

interface SummaryRow {
  id: string;
  status: EmailStatus;
  source: EmailSource;
  campaign_id: string | null;
  template_id: string | null;
  contact_id: string | null;
  to_email: string;
  subject: string;
  attempts: number;
  error: string | null;
  created_at: Timestamp;
  sent_at: Timestamp | null;
  updated_at: Timestamp;
}

interface DetailRow extends SummaryRow {
  contact_email: string | null;
  from_email: string;
  last_attempt_at: Timestamp | null;
  smtp_response: string | null;
  delivered_at: Timestamp | null;
  bounced_at: Timestamp | null;
  bounce_type: 'hard' | 'soft' | null;
  complained_at: Timestamp | null;
  open_count: number;
  opened_at: Timestamp | null;
  last_opened_at: Timestamp | null;
  click_count: number;
  clicked_at: Timestamp | null;
  last_clicked_at: Timestamp | null;
  links: { url: string; first: string }[];
}

const iso = (t: Timestamp) => new Date(t).toISOString();
const isoOrNull = (t: Timestamp | null) => (t === null ? null : iso(t));

const SUMMARY_COLUMNS = `e.id, e.status, e.source, e.campaign_id, e.template_id, e.contact_id, e.to_email, e.subject,
  e.attempts, e.error, e.created_at, e.sent_at, e.updated_at`;

const toSummary = (r: SummaryRow): EmailSummary => ({
  id: r.id,
  status: r.status,
  source: r.source,
  campaignId: r.campaign_id,
  templateId: r.template_id,
  contactId: r.contact_id,
  to: r.to_email,
  subject: r.subject,
  attempts: r.attempts,
  error: r.error,
  createdAt: iso(r.created_at),
  sentAt: isoOrNull(r.sent_at),
  updatedAt: iso(r.updated_at),
});

/**
 * One email of the project; another project's is not found. The links clicked come from the
 * contact's `email.clicked` events (one per link and email, db/messages/engagement.ts), so they are gone
 * with the contact, while the counts, kept on the email, stay.
 */
export async function getEmailDetail(em: EntityManager, projectId: string, id: string): Promise<EmailDetail> {
  const row = await queryOne<DetailRow>(
    em,
    `select ${SUMMARY_COLUMNS}, c.email as contact_email, e.from_email, e.last_attempt_at, e.smtp_response,
       e.delivered_at, e.bounced_at, e.bounce_type, e.complained_at,
       e.open_count, e.opened_at, e.last_opened_at, e.click_count, e.clicked_at, e.last_clicked_at,
       coalesce((
         select jsonb_agg(jsonb_build_object('url', l.url, 'first', l.first) order by l.first, l.url)
         from (select ev.data->>'url' as url, min(ev.created_at) as first from events ev
               where ev.contact_id = e.contact_id and ev.name = 'email.clicked' and ev.data->>'emailId' = e.id::text
               group by 1) l
       ), '[]'::jsonb) as links
     from emails e left join contacts c on c.id = e.contact_id
     where e.project_id = ? and e.id = ?`,
    [projectId, id],
  );
  if (!row) throw notFound('email');
  const { contactId, ...summary } = toSummary(row);
  return {
    ...summary,
    contact: contactId && row.contact_email ? { id: contactId, email: row.contact_email } : null,
    from: row.from_email,
    lastAttemptAt: isoOrNull(row.last_attempt_at),
    relayResponse: row.smtp_response,
    deliveredAt: isoOrNull(row.delivered_at),
    bouncedAt: isoOrNull(row.bounced_at),
    bounceType: row.bounce_type,
    complainedAt: isoOrNull(row.complained_at),
    opens: { count: row.open_count, first: isoOrNull(row.opened_at), last: isoOrNull(row.last_opened_at) },
    clicks: {
      count: row.click_count,
      first: isoOrNull(row.clicked_at),
      last: isoOrNull(row.last_clicked_at),
      links: row.links.map((l) => ({ url: l.url, first: iso(l.first) })),
    },
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Email ids are random UUIDs, so the page key is (created_at, id): the cursor carries the last
 * row's creation time in microseconds (what PostgreSQL keeps) and its id.
 */
const emailCursor = (createdMicros: string, id: string) => encodeCursor(`${createdMicros}:${id}`);

function readEmailCursor(cursor: string): { createdMicros: string; id: string } {
  const [createdMicros, id, ...rest] = decodeCursor(cursor).split(':');
  if (rest.length === 0 && createdMicros && /^\d{1,18}$/.test(createdMicros) && id && UUID.test(id)) return { createdMicros, id };
  throw new AppError(400, 'INVALID_CURSOR', 'The cursor is not valid', {
    suggestion: 'Pass the cursor exactly as returned by the previous page, or omit it to start over.',
  });
}

/**
 * The project's emails, newest first, optionally of one contact and/or in one status; the same
 * page shape as every list (`total` on the first page only). Rows created while a client pages
 * sort before its cursor and never shift a page.
 */
export async function listEmails(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string; contactId?: string; status?: EmailStatus },
): Promise<CursorPage<EmailSummary>> {
  const where = ['e.project_id = ?'];
  const params: unknown[] = [projectId];
  if (opts.contactId) {
    where.push('e.contact_id = ?');
    params.push(opts.contactId);
  }
  if (opts.status) {
    where.push('e.status = ?');
    params.push(opts.status);
  }
  const total = opts.cursor
    ? 0
    : Number((await queryOne<{ n: string }>(em, `select count(*) as n from emails e where ${where.join(' and ')}`, params))!.n);
  if (opts.cursor) {
    const after = readEmailCursor(opts.cursor);
    where.push(`(e.created_at, e.id) < (timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?::uuid)`);
    params.push(after.createdMicros, after.id);
  }
  const rows = await query<SummaryRow & { created_micros: string }>(
    em,
    `select ${SUMMARY_COLUMNS}, (extract(epoch from e.created_at) * 1000000)::bigint::text as created_micros
     from emails e where ${where.join(' and ')}
     order by e.created_at desc, e.id desc limit ?`,
    [...params, opts.limit + 1],
  );
  return pageOfRows(rows, opts.limit, total, (last) => emailCursor(last.created_micros, last.id), toSummary);
}
