import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, validationError } from '../../errors';
import type { AttachmentFile } from '../../mail/compose';
import { Coalescer } from '../coalescer';
import { CONTACT_COLUMNS, type ContactDto, type ContactRow, type ContactUpsert, normalizeEmail, toContactDto } from '../contacts/contacts';
import { planDataPatch } from '../contacts/data';
import { inContactRounds } from '../contacts/rounds';
import type { JsonValue } from '../entities/contact';
import type { BodyFormat } from './content';
import { senderDomain, type SenderPolicy } from '../domains/domains';
import { createAttachmentSet, type EmailSource } from './emails';
import {
  type EmailPlan,
  planEmails,
  type PreparedEmail,
  prepareEmail,
  SENDER_FACTS,
  type SenderFacts,
  senderFactsOf,
  type SenderFactsRow,
  writeEmailsWithContacts,
} from './prepare';
import { requireAllowance } from '../billing/allowance';

import { newId } from '../ids';
import type { Orm } from '../orm';
import { query, transaction } from '../sql';
import { getTemplate, type TemplateDto } from '../templates/templates';

type Mailbox = string | { name?: string; email: string };

export interface SendRequest {
  to: Mailbox | Mailbox[];
  subject?: string;
  body?: string;
  /** How the body (given or the template's) is written; `markdown` is rendered to HTML (mail/markdown.ts). */
  type?: BodyFormat;
  template?: string;
  from?: Mailbox;
  /** Deprecated sender display name, used when `from` is a bare address. */
  name?: string;
  reply?: string;
  data?: Record<string, unknown>;
  subscribed?: boolean;
  headers?: Record<string, string>;
  attachments?: AttachmentFile[];
  /** Open and click tracking; defaults to on for MARKETING templates, off otherwise. */
  tracking?: boolean;
}

export interface QueuedEmail {
  contact: { id: string; email: string };
  email: string;
}

export interface SendContext {
  projectId: string;
  publicUrl: string;
  linkSecret: string;
  maxMessageBytes: number;
  senders: SenderPolicy;
  /** The task queue whose delivery engine sends these emails. */
  queue: string;
}

const mailbox = (m: Mailbox) => (typeof m === 'string' ? { email: m, name: undefined } : m);

export interface SendPlan {
  plan: EmailPlan;
  recipients: { email: string; name?: string }[];
  attachments: AttachmentFile[];
}

interface Sender {
  template: TemplateDto | undefined;
  from: { email: string; name?: string };
}

/** The template and the sender a send names: the first refusals. */
async function senderOf(em: EntityManager, ctx: SendContext, req: SendRequest): Promise<Sender> {
  const template = req.template ? await getTemplate(em, ctx.projectId, req.template) : undefined;
  const from = req.from ? mailbox(req.from) : template?.from ? { email: template.from, name: template.fromName ?? undefined } : undefined;
  if (!from) {
    const message = template ? `The template ${template.id} has no sender; give \`from\`` : 'Required: give `from`, or a template that has a sender';
    throw validationError([{ field: 'from', message, code: 'invalid_type' }]);
  }
  return { template, from };
}

/**
 * The refusals that come before any write: the sender's domain, the template, the size. `facts`:
 * the sender's, read with the recipients' contacts.
 */
async function planSend(em: EntityManager, ctx: SendContext, req: SendRequest, sender: Sender, facts: SenderFacts): Promise<SendPlan> {
  const { template, from } = sender;
  const body = req.body ?? template?.body;
  const attachments = req.attachments ?? [];
  const plan = await planEmails(
    em,
    {
      projectId: ctx.projectId,
      source: 'transactional',
      templateId: template?.id ?? null,
      from: { email: from.email, name: from.name ?? req.name ?? null },
      replyTo: req.reply ?? template?.replyTo ?? null,
      subject: (req.subject ?? template?.subject)!,
      body: body!,
      format: req.type,
      marketing: template?.type === 'MARKETING',
      tracking: req.tracking,
      headers: req.headers,
      queue: ctx.queue,
    },
    { senders: ctx.senders, links: { publicUrl: ctx.publicUrl, linkSecret: ctx.linkSecret } },
    facts,
  );
  const size = Buffer.byteLength(body!) + attachments.reduce((n, a) => n + a.content.length, 0);
  if (size > ctx.maxMessageBytes) {
    throw new AppError(413, 'PAYLOAD_TOO_LARGE', 'The message would exceed 40 MB', {
      suggestion: 'Send smaller attachments or a shorter body.',
    });
  }
  return { plan, recipients: (Array.isArray(req.to) ? req.to : [req.to]).map(mailbox), attachments };
}

const recipientData = (req: SendRequest, recipient: { name?: string }) => (recipient.name ? { ...req.data, name: recipient.name } : req.data);

/** Tries a write that lost its contacts to concurrent creators this many times before it gives up. */
const WRITE_ATTEMPTS = 3;

export interface FactsItem {
  projectId: string;
  domain: string;
  /** Normalized. */
  email: string;
}

interface Facts {
  sender: SenderFacts;
  contact: ContactDto | undefined;
}

interface WriteItem {
  contact: ContactUpsert;
  email: PreparedEmail;
}

/**
 * How a send reaches the database: the same two steps (read the sender and the contacts, then
 * write contacts and emails in one statement) either in statements shared with concurrent
 * requests (SendBatches) or in the caller's transaction (inTransaction).
 */
interface SendIo {
  /** For the template and an attachment set. */
  em: EntityManager;
  read(items: FactsItem[]): Promise<Facts[]>;
  /** Whether each email was written; `capped`: the project caps transactional mail, checked with the write. */
  write(items: WriteItem[], capped: boolean): Promise<boolean[]>;
}

/**
 * POST /v1/send's one write path: the sender and template are checked, each recipient's contact is
 * read and the email rendered with the contact as the upsert will leave it, then one statement
 * upserts the contacts, records their subscription changes and inserts one QUEUED email each
 * (db/messages/prepare.ts writeEmailsWithContacts). An email whose address another request created
 * between the read and the write was rendered for the wrong contact and is not written: those
 * recipients are read and rendered again. The caller wakes the delivery engine after the commit
 * (temporal/wakeups.ts).
 */
async function writeSend(io: SendIo, ctx: SendContext, req: SendRequest): Promise<QueuedEmail[]> {
  const sender = await senderOf(io.em, ctx, req);
  const recipients = (Array.isArray(req.to) ? req.to : [req.to]).map(mailbox);
  const domain = senderDomain(sender.from.email);
  const read = (indexes: number[]) => io.read(indexes.map((i) => ({ projectId: ctx.projectId, domain, email: normalizeEmail(recipients[i]!.email) })));
  let pending = recipients.map((_, i) => i);
  let facts = await read(pending);
  const { plan, attachments } = await planSend(io.em, ctx, req, sender, facts[0]!.sender);
  if (attachments.length) plan.attachmentSetId = await createAttachmentSet(io.em, ctx.projectId, attachments);
  const queued: QueuedEmail[] = new Array(recipients.length);
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > WRITE_ATTEMPTS) throw new AppError(409, 'CONFLICT', 'The recipients were being changed by other requests; try again');
    const items = pending.map((i, k) => writeItem(ctx, req, plan, recipients[i]!, facts[k]!.contact));
    const written = await io.write(items, plan.checkCap);
    pending.forEach((i, k) => {
      if (written[k]) queued[i] = { contact: { id: items[k]!.contact.newId!, email: items[k]!.email.toEmail }, email: items[k]!.email.id };
    });
    pending = pending.filter((_, k) => !written[k]);
    if (pending.length > 0) facts = await read(pending);
  }
  return queued;
}

/** One recipient's contact upsert, and its email rendered with the contact as the upsert will leave it. */
function writeItem(ctx: SendContext, req: SendRequest, plan: EmailPlan, recipient: { email: string; name?: string }, existing: ContactDto | undefined): WriteItem {
  const email = normalizeEmail(recipient.email);
  const upsert: ContactUpsert = {
    projectId: ctx.projectId,
    email,
    subscribed: req.subscribed,
    data: recipientData(req, recipient),
    subscribedWhenNew: false,
    newId: existing?.id ?? newId('cnt'),
  };
  const patch = planDataPatch(upsert.data);
  const data: Record<string, JsonValue> = { ...existing?.data, ...patch.set };
  for (const key of patch.remove) delete data[key];
  const now = new Date().toISOString();
  const contact: ContactDto = {
    id: upsert.newId!,
    email,
    subscribed: req.subscribed ?? existing?.subscribed ?? false,
    data,
    createdAt: existing?.createdAt ?? now,
    updatedAt: now,
  };
  return { contact: upsert, email: prepareEmail(plan, contact, { extra: patch.transient, toName: recipient.name ?? null }) };
}

/**
 * A send in the caller's transaction: with an Idempotency-Key (its transaction), and whatever
 * must be all or nothing (several recipients, attachments). Over the project's monthly
 * transactional cap the whole request is refused (402) and rolls back.
 */
export function queueSend(tx: EntityManager, ctx: SendContext, req: SendRequest): Promise<QueuedEmail[]> {
  return writeSend(inTransaction(tx), ctx, req);
}

function inTransaction(tx: EntityManager): SendIo {
  return {
    em: tx,
    read: (items) => readFacts(tx, items),
    write: async (items, capped) => {
      if (capped) await requireAllowance(tx, items[0]!.email.plan.projectId, 'transactional', items.length);
      const results = await inContactRounds(items, (i) => i.contact, (round) => writeEmailsWithContacts(tx, round.map((i) => i.contact), round.map((i) => i.email)));
      const failed = results.find((r) => r instanceof Error);
      if (failed) throw failed;
      return results as boolean[];
    },
  };
}

/**
 * The common /v1/send (one recipient, no attachments, no Idempotency-Key) without a transaction of
 * its own: concurrent requests share each step's statement (db/coalescer.ts), so with the API
 * key's lookup a request costs three shared round trips. A project that caps transactional mail
 * writes in a transaction of its own, where the cap's lock is held.
 */
export class SendBatches {
  /** One manager for every batch: raw statements only take a pooled connection through it. */
  private readonly em: EntityManager;
  private readonly reads: Coalescer<FactsItem, Facts>;
  private readonly writes: Coalescer<WriteItem, boolean>;

  constructor(orm: Orm) {
    const em = (this.em = orm.em.fork());
    this.reads = new Coalescer((items) => readFacts(em, items));
    this.writes = new Coalescer((items) =>
      inContactRounds(items, (i) => i.contact, (round) => writeEmailsWithContacts(em, round.map((i) => i.contact), round.map((i) => i.email))),
    );
  }

  /** Whether `req` goes this way; any other goes through queueSend in a transaction. */
  static takes(req: SendRequest): boolean {
    return (!Array.isArray(req.to) || req.to.length === 1) && !req.attachments?.length;
  }

  /**
   * `scope.em` (a request's own manager, forked when first read) is read only for a template:
   * forking one per request was 1.1 % of the API's CPU samples under /v1/send load.
   */
  send(scope: { readonly em: EntityManager }, ctx: SendContext, req: SendRequest): Promise<QueuedEmail[]> {
    return writeSend(
      {
        em: req.template ? scope.em : this.em,
        read: (items) => Promise.all(items.map((item) => this.reads.run(item))),
        write: (items, capped) =>
          capped ? transaction(this.em, (tx) => inTransaction(tx).write(items, true)) : Promise.all(items.map((item) => this.writes.run(item))),
      },
      ctx,
      req,
    );
  }
}

/** Each item's sender facts (a transactional plan's) and contact, in one statement (factsStatement). */
async function readFacts(em: EntityManager, items: FactsItem[]): Promise<Facts[]> {
  const { sql, params } = factsStatement(items);
  const rows = await query<Partial<ContactRow> & SenderFactsRow & { ord: number }>(em, sql, params);
  const facts: Facts[] = new Array(items.length);
  for (const row of rows) {
    facts[row.ord] = { sender: senderFactsOf(row), contact: row.id ? toContactDto(row as ContactRow) : undefined };
  }
  return facts;
}

/**
 * readFacts' statement, apart so a test can read its plan. The items come as one JSON value: a
 * plan that sees an array knows its length, so PostgreSQL planned every call for its own, and
 * planning took four times the statement's run (53 against 14 µs per email under /v1/send load).
 * From JSON every plan guesses the same number of rows (100), and PostgreSQL keeps one for the
 * connection (db/sql.ts), planned again as the tables grow (db/statistics.ts). The lookups are
 * lateral, so that for 100 rows the kept plan still reads each contact by its key rather than
 * hashing the table.
 */
export function factsStatement(items: readonly FactsItem[]): { sql: string; params: unknown[] } {
  return {
    sql: `with r as (
       select u.*, ?::text as source from jsonb_to_recordset(?::jsonb) as u(ord int, project_id text, domain text, email text)
     )
     select r.ord, ${SENDER_FACTS.columns}, ${CONTACT_COLUMNS}
     from r ${SENDER_FACTS.join} left join lateral (
       select ${CONTACT_COLUMNS} from contacts c where c.project_id = r.project_id and c.email = r.email limit 1) c on true`,
    params: [
      'transactional' satisfies EmailSource,
      JSON.stringify(items.map((i, ord) => ({ ord, project_id: i.projectId, domain: i.domain, email: i.email }))),
    ],
  };
}
