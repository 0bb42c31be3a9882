import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, validationError } from '../../errors';
import type { AttachmentFile } from '../../mail/compose';
import { Coalescer } from '../coalescer';
import { CONTACT_COLUMNS, type ContactDto, type ContactRow, type ContactUpsert, contactUpsertCtes, normalizeEmail, toContactDto, upsertContact } from '../contacts/contacts';
import { planDataPatch } from '../contacts/data';
import { inContactRounds } from '../contacts/rounds';
import type { JsonValue } from '../entities/contact';
import type { BodyFormat } from './content';
import { senderDomain, type SenderPolicy } from '../domains/domains';
import { type DeliveryHandoff, Handover } from './delivery-handoff';
import { releaseClaims } from './delivery-queue';
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
  writeEmails,
  writeEmailsWithContacts,
} from './prepare';
import { newId } from '../ids';
import type { Orm } from '../orm';
import { query } from '../sql';
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
 * The refusals that come before any write: no sender, the sender's domain, the template, the size.
 * `facts`: the sender's, when the caller read them (SendBatches).
 */
async function planSend(em: EntityManager, ctx: SendContext, req: SendRequest, sender?: Sender, facts?: SenderFacts): Promise<SendPlan> {
  const { template, from } = sender ?? (await senderOf(em, ctx, req));
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

/**
 * Everything /v1/send writes, in the caller's transaction: each recipient upserted and rendered on
 * its own, one after another, and one QUEUED email row each. Delivery is the engine's job
 * (db/messages/delivery-queue.ts): the committed rows are its work, so the 200 survives any crash; the
 * caller wakes it after the commit (deps.wakeups). Over the project's monthly transactional cap the
 * whole request is refused (402) and rolls back. With a `handover` (SendBatches.handover), the emails
 * it has room for are written claimed instead, for the caller to hand over after its commit.
 */
export async function queueSend(em: EntityManager, ctx: SendContext, req: SendRequest, planned?: SendPlan, handover?: Handover): Promise<QueuedEmail[]> {
  const { plan, recipients, attachments } = planned ?? (await planSend(em, ctx, req));
  if (attachments.length) plan.attachmentSetId = await createAttachmentSet(em, ctx.projectId, attachments);
  const prepared: PreparedEmail[] = [];
  for (const recipient of recipients) {
    const up = await upsertContact(em, ctx.projectId, { email: recipient.email, subscribed: req.subscribed, data: recipientData(req, recipient) }, {
      subscribedWhenNew: false,
    });
    prepared.push(prepareEmail(plan, up.contact, { extra: up.transient, toName: recipient.name ?? null }));
  }
  // Last, so the monthly cap's lock is held only for the insert and the caller's commit. The
  // caller wakes the delivery engine (or hands the emails over) once it has committed.
  for (const p of prepared) handover?.reserve(p);
  const written = await writeEmails(em, prepared, 'refuse', 'caller');
  prepared.forEach((p, i) => handover?.wrote(p, written[i]!.suppressed));
  return prepared.map((p, i) => ({ contact: { id: p.contactId!, email: p.toEmail }, email: written[i]!.id }));
}

interface FactsItem {
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
 * The common /v1/send (one recipient, no attachments, no monthly cap on transactional mail)
 * without a transaction, and with concurrent requests in shared statements (db/coalescer.ts):
 * one reads every request's sender facts and contact, and after each request has rendered its
 * email with the contact as the upsert will leave it, one upserts the contacts, records
 * subscription changes and writes the emails (with the API key's lookup, three round trips per
 * request, each shared). An email is written only if the upsert kept the contact id it was rendered
 * for (the address was created meanwhile); when it was not, or this path does not apply, `send`
 * answers without emails and the caller runs queueSend in a transaction, which repeats the upsert
 * harmlessly.
 */
export class SendBatches {
  /** One manager for every batch: raw statements only take a pooled connection through it. */
  private readonly em: EntityManager;
  private readonly reads: Coalescer<FactsItem, Facts>;
  /** Per item: whether its email was written, and if so what the write found (WrittenEmail.suppressed). */
  private readonly writes: Coalescer<WriteItem, { suppressed: boolean } | undefined>;

  /** `handoff`: the delivery engine of this process (API and worker in one), which takes the emails written here already claimed. */
  constructor(
    orm: Orm,
    private readonly handoff?: DeliveryHandoff,
  ) {
    const em = (this.em = orm.em.fork());
    this.reads = new Coalescer((items) => readFacts(em, items), { maxBatch: 64, maxInFlight: 2 });
    this.writes = new Coalescer(
      (items) => inContactRounds(items, (i) => i.contact, (round) => writeRound(em, round)),
      { maxBatch: 64, maxInFlight: 4 },
    );
  }

  /**
   * `scope.em` (a request's own manager, forked when first read) is read only for a template: without
   * one nothing here reads through a manager but the shared statements, and forking one was 1.1 % of
   * the API's CPU samples under /v1/send load.
   *
   * `wake`: whether the caller must wake an engine (the email did not go to this process's engine
   * in memory, DeliveryHandoff).
   */
  async send(
    scope: { readonly em: EntityManager },
    ctx: SendContext,
    req: SendRequest,
  ): Promise<{ emails: QueuedEmail[]; wake: boolean } | { planned?: SendPlan }> {
    if (Array.isArray(req.to) && req.to.length !== 1) return {};
    if (req.attachments?.length) return {};
    const em = req.template ? scope.em : this.em;
    const recipient = mailbox(Array.isArray(req.to) ? req.to[0]! : req.to);
    const sender = await senderOf(em, ctx, req);
    const email = normalizeEmail(recipient.email);
    const facts = await this.reads.run({ projectId: ctx.projectId, domain: senderDomain(sender.from.email), email });
    const planned = await planSend(em, ctx, req, sender, facts.sender);
    if (planned.plan.checkCap) return { planned };
    const existing = facts.contact;
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
    const contact: ContactDto = {
      id: upsert.newId!,
      email,
      subscribed: req.subscribed ?? existing?.subscribed ?? false,
      data,
      createdAt: existing?.createdAt ?? new Date().toISOString(),
      updatedAt: new Date().toISOString(),
    };
    const prepared = prepareEmail(planned.plan, contact, { extra: patch.transient, toName: recipient.name ?? null });
    const handover = this.handover(ctx.queue);
    handover.reserve(prepared);
    let written: { suppressed: boolean } | undefined;
    try {
      written = await this.writes.run({ contact: upsert, email: prepared });
    } catch (err) {
      handover.cancel();
      throw err;
    }
    if (!written) {
      handover.cancel();
      return { planned };
    }
    handover.wrote(prepared, written.suppressed);
    return { emails: [{ contact: { id: contact.id, email }, email: prepared.id }], wake: await this.deliverCommitted(handover) };
  }

  /** For the emails of one write (queueSend), to the delivery engine of this process if it has room. */
  handover(queue: string): Handover {
    return new Handover(this.handoff, queue);
  }

  /**
   * After the write's commit: its emails written claimed go to the engine. Returns whether the caller
   * must wake an engine: for emails written QUEUED, and for those no round took any more, whose
   * claims go back first. Should that fail, their lease runs out and an engine claims them then.
   */
  async deliverCommitted(handover: Handover): Promise<boolean> {
    const { givenBack, wake } = handover.deliver();
    if (givenBack.length) await releaseClaims(this.em, givenBack).catch(() => undefined);
    return wake;
  }
}

/** Each item's sender facts (a transactional plan's) and contact, in one statement. */
async function readFacts(em: EntityManager, items: FactsItem[]): Promise<Facts[]> {
  const rows = await query<Partial<ContactRow> & SenderFactsRow & { ord: number }>(
    em,
    `with r as (
       select u.*, ?::text as source from unnest(?::int[], ?::text[], ?::text[], ?::text[]) as u(ord, project_id, domain, email)
     )
     select r.ord, ${SENDER_FACTS.columns}, ${CONTACT_COLUMNS}
     from r ${SENDER_FACTS.join} left join contacts c on c.project_id = r.project_id and c.email = r.email`,
    ['transactional' satisfies EmailSource, items.map((_, i) => i), items.map((i) => i.projectId), items.map((i) => i.domain), items.map((i) => i.email)],
  );
  const facts: Facts[] = new Array(items.length);
  for (const row of rows) {
    facts[row.ord] = { sender: senderFactsOf(row), contact: row.id ? toContactDto(row as ContactRow) : undefined };
  }
  return facts;
}

async function writeRound(em: EntityManager, items: WriteItem[]): Promise<({ suppressed: boolean } | undefined)[]> {
  const written = await writeEmailsWithContacts(em, contactUpsertCtes(items.map((i) => i.contact), { recordChanges: true }), items.map((i) => i.email));
  return items.map((i) => written.get(i.email.id));
}
