import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { allowance, OVER_LIMIT_ERROR, refuseOverLimit, requireAllowance } from '../billing/allowance';
import { type ContactDto, type ContactUpsert, contactUpsertCtes } from '../contacts/contacts';
import { acceptedSenderDomain, type DomainStatus, senderDomain, type SenderPolicy } from '../domains/domains';
import { type BodyFormat, type CompiledContent, compileContent, type MarketingContext, marketingContext, renderForContact } from './content';
import { recordEventsCtes } from '../record-events';
import type { EmailSource, EmailStatus } from './emails';
import { query, queryOne } from '../sql';

/**
 * The one way an email comes to exist, whoever sends it (/v1/send, a journey's SEND_EMAIL step, a
 * campaign batch, a campaign's test copy):
 *
 *   planEmails    once per send: the sender's verified domain, the compiled subject and body,
 *                 the marketing context (footer, unsubscribe headers), tracking on or off;
 *   prepareEmail  once per recipient: the id, then the contact's rendering with it;
 *   writeEmails   once per transaction: the billing cap and the only INSERT INTO emails
 *                 (writeEmailsWithContacts: the same INSERT in the statement that upserts the
 *                 recipients, for /v1/send). The writer wakes the delivery engine after its
 *                 commit (temporal/wakeups.ts).
 *
 * Suppression and a disabled project are checked where the email goes out (the delivery engine
 * and the campaign batch read them with the row), so an email written before either changed is
 * still held back.
 */

export interface PlanInput {
  projectId: string;
  source: EmailSource;
  templateId?: string | null;
  campaignId?: string | null;
  from: { email: string; name: string | null };
  replyTo: string | null;
  subject: string;
  body: string;
  format?: BodyFormat;
  /** Marketing mail gets the unsubscribe footer and headers; a context already read with the caller's row saves the lookup. */
  marketing: boolean | MarketingContext;
  /** Open and click tracking; marketing mail is tracked unless told otherwise. */
  tracking?: boolean;
  headers?: Record<string, string>;
  attachmentSetId?: string | null;
  /** The task queue whose delivery engine sends the emails; null: the campaign's batches send them. */
  queue: string | null;
  /** The plan serves many writes over minutes (a campaign batch): a cap set meanwhile applies to the next one. */
  longLived?: boolean;
}

export interface EmailPlan {
  projectId: string;
  source: EmailSource;
  templateId: string | null;
  campaignId: string | null;
  domainId: string;
  /**
   * Whether writeEmails checks the monthly cap: the project capped this source when the plan was
   * read (with the sender's domain, one round trip), or the plan is long-lived.
   */
  checkCap: boolean;
  from: { email: string; name: string | null };
  replyTo: string | null;
  content: CompiledContent;
  marketing: MarketingContext | false;
  tracked: boolean;
  headers: Record<string, string> | undefined;
  attachmentSetId: string | null;
  queue: string | null;
  links: Links;
}

export interface Links {
  publicUrl: string;
  linkSecret: string;
}

/** What a plan reads about its sender: the domain's row, and whether the project caps the source. */
export interface SenderFacts {
  domain: { id: string; status: DomainStatus } | undefined;
  capped: boolean;
}

/**
 * Refusals come in this order, and each is an AppError: the sender's domain (403
 * DOMAIN_NOT_VERIFIED), then the template's syntax (422 naming the field). `facts`, when the
 * caller read them with other rows (db/messages/send.ts SendBatches), saves the lookup.
 */
export async function planEmails(
  em: EntityManager,
  input: PlanInput,
  ctx: { senders: SenderPolicy; links: Links },
  facts?: SenderFacts,
): Promise<EmailPlan> {
  const domain = senderDomain(input.from.email);
  facts ??= await readSenderFacts(em, input.projectId, input.source, domain);
  const domainId = acceptedSenderDomain(domain, facts.domain, ctx.senders);
  const content = compileContent(input.subject, input.body, input.format);
  const marketing = input.marketing === true ? await marketingContext(em, input.projectId) : input.marketing;
  return {
    projectId: input.projectId,
    source: input.source,
    templateId: input.templateId ?? null,
    campaignId: input.campaignId ?? null,
    domainId,
    checkCap: facts.capped || !!input.longLived,
    from: input.from,
    replyTo: input.replyTo,
    content,
    marketing,
    tracked: input.tracking ?? !!marketing,
    headers: input.headers,
    attachmentSetId: input.attachmentSetId ?? null,
    queue: input.queue,
    links: ctx.links,
  };
}

/**
 * The sender facts of each row of a relation `r` (project_id, source, domain), for a select that
 * may read more beside them (SendBatches reads each request's contact in the same statement):
 * `select …, ${SENDER_FACTS.columns} from r ${SENDER_FACTS.join}`, each row read with senderFactsOf.
 */
export const SENDER_FACTS = {
  columns: `d.id as domain_id, d.status as domain_status,
    exists (select 1 from billing_limits b where b.project_id = r.project_id and b.category = r.source) as capped`,
  // A lookup per row of r however many rows a kept plan guessed for it (db/sql.ts, db/statistics.ts).
  join: `left join lateral (
    select d.id, d.status from domains d where d.domain = r.domain and d.project_id = r.project_id limit 1) d on true`,
};

export interface SenderFactsRow {
  domain_id: string | null;
  domain_status: DomainStatus | null;
  capped: boolean;
}

export const senderFactsOf = (row: SenderFactsRow): SenderFacts => ({
  domain: row.domain_id ? { id: row.domain_id, status: row.domain_status! } : undefined,
  capped: row.capped,
});

// One round trip for both facts.
async function readSenderFacts(em: EntityManager, projectId: string, source: EmailSource, domain: string): Promise<SenderFacts> {
  const row = await queryOne<SenderFactsRow>(
    em,
    `select ${SENDER_FACTS.columns} from (select ?::text as project_id, ?::text as source, ?::text as domain) as r ${SENDER_FACTS.join}`,
    [projectId, source, domain],
  );
  return senderFactsOf(row!);
}

export interface PreparedEmail {
  id: string;
  plan: EmailPlan;
  contactId: string | null;
  toEmail: string;
  toName: string | null;
  subject: string;
  body: string;
  headers: Record<string, string>;
  /** Writes the email at most once per key (a journey step, a campaign recipient): a retry finds the first one. */
  sourceKey: string | null;
}

/**
 * One recipient's email. The id is chosen before rendering because tracked links and the open
 * pixel carry it. `contact` may be a stand-in (a test copy to an address that is no contact):
 * then pass `contactId: null`.
 */
export function prepareEmail(
  plan: EmailPlan,
  contact: ContactDto,
  opts: { extra?: Record<string, unknown>; toEmail?: string; toName?: string | null; contactId?: string | null; sourceKey?: string } = {},
): PreparedEmail {
  const id = randomUUID();
  const rendered = renderForContact(plan.content, contact, {
    extra: opts.extra ?? {},
    publicUrl: plan.links.publicUrl,
    linkSecret: plan.links.linkSecret,
    marketing: plan.marketing,
    headers: plan.headers,
    tracking: plan.tracked ? { emailId: id } : undefined,
  });
  return {
    id,
    plan,
    contactId: opts.contactId === undefined ? contact.id : opts.contactId,
    toEmail: opts.toEmail ?? contact.email,
    toName: opts.toName ?? null,
    ...rendered,
    sourceKey: opts.sourceKey ?? null,
  };
}

/** A row as writeEmails left it: the new one, or the one an earlier attempt wrote under the same source key. */
export interface WrittenEmail {
  id: string;
  status: EmailStatus;
  /** False when an earlier attempt wrote it: its content (below) is what goes, not this attempt's rendering. */
  created: boolean;
  /** Refused by the monthly cap (FAILED with OVER_LIMIT_ERROR, never delivered). */
  overLimit: boolean;
  toEmail: string;
  subject: string;
  body: string;
  headers: Record<string, string>;
}

/**
 * What the project's monthly cap does with a write that does not fit: `refuse` the whole write
 * (402, nothing written: a request the caller can see), or write the excess FAILED with
 * OVER_LIMIT_ERROR (`fail`: work that runs without a caller, the earliest emails get the room).
 */
export type OverLimit = 'refuse' | 'fail';

/**
 * Writes the emails in the caller's transaction (the cap's lock lasts until its commit); the
 * caller wakes the delivery engine of their queue after the commit. Returns every email's row in
 * input order. A row under the same source key that another transaction is writing
 * right now is not visible yet: that is an error to retry, not a row to write twice.
 */
export async function writeEmails(
  em: EntityManager,
  emails: PreparedEmail[],
  overLimit: OverLimit,
): Promise<WrittenEmail[]> {
  if (emails.length === 0) return [];
  const projectId = emails[0]!.plan.projectId;
  const category = emails[0]!.plan.source;
  if (emails.some((e) => e.plan.projectId !== projectId || e.plan.source !== category)) {
    throw new Error('writeEmails: one project and one source per write (the cap is counted per source)');
  }
  let remaining = Infinity;
  if (emails.some((e) => e.plan.checkCap)) {
    if (overLimit === 'refuse') await requireAllowance(em, projectId, category, emails.length);
    else remaining = (await allowance(em, projectId, category, { lock: true })).remaining;
  }

  const rows = await insertRows(em, emails);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const bySourceKey = new Map(rows.filter((r) => r.source_key).map((r) => [r.source_key!, r]));
  const written = emails.map((e): WrittenEmail => {
    const row = byId.get(e.id) ?? (e.sourceKey ? bySourceKey.get(e.sourceKey) : undefined);
    if (!row) throw new Error(`The email for ${e.sourceKey} is being written by another transaction`);
    return {
      id: row.id,
      status: row.status,
      created: row.created,
      overLimit: row.error === OVER_LIMIT_ERROR,
      toEmail: row.to_email ?? e.toEmail,
      subject: row.subject ?? e.subject,
      body: row.body ?? e.body,
      headers: row.headers ?? e.headers,
    };
  });
  // In input order: the earliest emails get what the cap leaves.
  const over = written.filter((w) => w.created).slice(remaining);
  await refuseOverLimit(em, over.map((w) => w.id));
  for (const w of over) Object.assign(w, { status: 'FAILED', overLimit: true });
  return written;
}

interface InsertedRow {
  id: string;
  source_key: string | null;
  status: EmailStatus;
  error: string | null;
  created: boolean;
  to_email: string | null;
  subject: string | null;
  body: string | null;
  headers: Record<string, string> | null;
}

/** The rows to insert, as one JSON parameter that `EMAIL_INPUT` reads. */
function inputRows(emails: PreparedEmail[]): string {
  return JSON.stringify(
    emails.map((e) => ({
      id: e.id,
      project_id: e.plan.projectId,
      contact_id: e.contactId,
      domain_id: e.plan.domainId,
      template_id: e.plan.templateId,
      campaign_id: e.plan.campaignId,
      source: e.plan.source,
      marketing: !!e.plan.marketing,
      to_email: e.toEmail,
      to_name: e.toName,
      from_email: e.plan.from.email,
      from_name: e.plan.from.name,
      reply_to: e.plan.replyTo,
      subject: e.subject,
      body: e.body,
      headers: e.headers,
      attachment_set_id: e.plan.attachmentSetId,
      source_key: e.sourceKey,
      queue: e.plan.queue,
    })),
  );
}

const EMAIL_INPUT = `input as (
       select * from jsonb_to_recordset(?::jsonb) as r(id uuid, project_id text, contact_id text, domain_id text,
         template_id text, campaign_id text, source text, marketing boolean, to_email text, to_name text, from_email text,
         from_name text, reply_to text, subject text, body text, headers jsonb, attachment_set_id uuid, source_key text, queue text)
     )`;

/** The INSERT INTO emails of `input`, rows of `input` that pass `where` only, each QUEUED. */
const insertEmails = (where = '') => `insert into emails (id, project_id, contact_id, domain_id, template_id, campaign_id, source, marketing, to_email, to_name,
         from_email, from_name, reply_to, subject, body, headers, attachment_set_id, source_key, queue, status)
       select id, project_id, contact_id, domain_id, template_id, campaign_id, source, marketing, to_email, to_name,
         from_email, from_name, reply_to, subject, body, headers, attachment_set_id, source_key, queue, 'QUEUED'
       from input ${where}
       on conflict (project_id, source_key) where source_key is not null do nothing`;

/**
 * writeEmails for emails whose contacts the same statement upserts (db/contacts/contacts.ts
 * contactUpsertCtes, one email each, distinct contacts): one statement, atomic without a
 * transaction, recording the subscription changes the upsert made. An email is written only if the
 * upsert left its contact with the id it was rendered for (another request may have created the
 * address first): whether each was written comes back, in order. The caller checks a capped plan's
 * allowance first, in the same transaction (db/messages/send.ts).
 */
export async function writeEmailsWithContacts(em: EntityManager, contacts: ContactUpsert[], emails: PreparedEmail[]): Promise<boolean[]> {
  const upsert = contactUpsertCtes(contacts, { recordChanges: true });
  const rows = await query<{ id: string }>(
    em,
    `${upsert.sql}, ${recordEventsCtes(upsert.changes!)}, ${EMAIL_INPUT}
     ${insertEmails('where exists (select 1 from up where up.id = input.contact_id)')}
     returning id`,
    [...upsert.params, inputRows(emails)],
  );
  const written = new Set(rows.map((r) => r.id));
  return emails.map((e) => written.has(e.id));
}

/** New rows come back with only their id; rows found under a source key come back whole. */
function insertRows(em: EntityManager, emails: PreparedEmail[]): Promise<InsertedRow[]> {
  return query<InsertedRow>(em, insertRowsStatement(emails.some((e) => e.sourceKey)), [inputRows(emails)]);
}

/** insertRows' statement (one parameter: the rows as JSON), apart so a test can read its plan. */
export function insertRowsStatement(keyed: boolean): string {
  return `with ${EMAIL_INPUT}, ins as (
       ${insertEmails()}
       returning id, source_key, status
     )
     select id, source_key, status, null as error, true as created,
       null as to_email, null as subject, null as body, null::jsonb as headers
     from ins
     ${
       keyed
         ? // One lookup per input row on emails_source_key: as a join, on statistics older than a
           // campaign's rows, the planner read the whole table for every batch (11 ms at 20,000).
           `union all
     select e.id, e.source_key, e.status, e.error, false, e.to_email, e.subject, e.body, e.headers
     from input i cross join lateral (
       select * from emails e where e.project_id = i.project_id and e.source_key = i.source_key and e.source_key is not null limit 1
     ) e`
         : ''
     }`;
}
