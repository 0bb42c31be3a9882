import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, validationError } from '../../errors';
import type { AttachmentFile } from '../../mail/compose';
import { type ContactDto, findContactByEmail, normalizeEmail, upsertContact, upsertContactCtes } from '../contacts/contacts';
import type { JsonValue } from '../entities/contact';
import type { BodyFormat } from './content';
import type { SenderPolicy } from '../domains/domains';
import { createAttachmentSet } from './emails';
import { type EmailPlan, planEmails, type PreparedEmail, prepareEmail, writeEmailWithContact, writeEmails } from './prepare';
import { recordSubscriptionChange, subscriptionChangeCte } from '../events/events';
import { getTemplate } from '../templates/templates';

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

/** The refusals that come before any write: no sender, the sender's domain, the template, the size. */
async function planSend(em: EntityManager, ctx: SendContext, req: SendRequest): Promise<SendPlan> {
  const template = req.template ? await getTemplate(em, ctx.projectId, req.template) : undefined;
  const body = req.body ?? template?.body;
  const from = req.from ? mailbox(req.from) : template?.from ? { email: template.from, name: template.fromName ?? undefined } : undefined;
  if (!from) {
    const message = template ? `The template ${template.id} has no sender; give \`from\`` : 'Required: give `from`, or a template that has a sender';
    throw validationError([{ field: 'from', message, code: 'invalid_type' }]);
  }
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
 * whole request is refused (402) and rolls back.
 */
export async function queueSend(em: EntityManager, ctx: SendContext, req: SendRequest, planned?: SendPlan): Promise<QueuedEmail[]> {
  const { plan, recipients, attachments } = planned ?? (await planSend(em, ctx, req));
  if (attachments.length) plan.attachmentSetId = await createAttachmentSet(em, ctx.projectId, attachments);
  const prepared: PreparedEmail[] = [];
  for (const recipient of recipients) {
    const up = await upsertContact(em, ctx.projectId, { email: recipient.email, subscribed: req.subscribed, data: recipientData(req, recipient) }, {
      subscribedWhenNew: false,
    });
    await recordSubscriptionChange(em, ctx.projectId, up.contact.id, up.previousSubscribed, up.contact.subscribed);
    prepared.push(prepareEmail(plan, up.contact, { extra: up.transient, toName: recipient.name ?? null }));
  }
  // Last, so the monthly cap's lock is held only for the insert and the caller's commit. The
  // caller wakes the delivery engine once it has committed.
  const written = await writeEmails(em, prepared, 'refuse', 'caller');
  return prepared.map((p, i) => ({ contact: { id: p.contactId!, email: p.toEmail }, email: written[i]!.id }));
}

/**
 * The common /v1/send (one recipient, no attachments, no monthly cap on transactional mail)
 * without a transaction: what queueSend writes, in one statement (with the API key's lookup, 3
 * round trips one after another where the transaction took 6: docs/performance.md). The contact
 * is read beside the plan and rendered as the upsert will leave it; the statement upserts it,
 * records a subscription change and writes the email, which it skips if the upsert kept another
 * id than the one rendered (the address was created meanwhile). Undefined when this path does not
 * apply or lost that race: then the caller runs queueSend in a transaction, which repeats the
 * upsert harmlessly.
 */
export async function queueSendOne(
  em: EntityManager,
  ctx: SendContext,
  req: SendRequest,
): Promise<{ emails: QueuedEmail[] } | { planned?: SendPlan }> {
  if (Array.isArray(req.to) && req.to.length !== 1) return {};
  if (req.attachments?.length) return {};
  const recipient = mailbox(Array.isArray(req.to) ? req.to[0]! : req.to);
  const [planned, existing] = await Promise.all([planSend(em, ctx, req), findContactByEmail(em, ctx.projectId, recipient.email)]);
  const { plan } = planned;
  if (plan.checkCap) return { planned };
  const up = upsertContactCtes(ctx.projectId, { email: recipient.email, subscribed: req.subscribed, data: recipientData(req, recipient) }, {
    subscribedWhenNew: false,
  });
  const data: Record<string, JsonValue> = { ...existing?.data, ...up.patch.set };
  for (const key of up.patch.remove) delete data[key];
  const contact: ContactDto = {
    id: existing?.id ?? up.newId,
    email: normalizeEmail(recipient.email),
    subscribed: req.subscribed ?? existing?.subscribed ?? false,
    data,
    createdAt: existing?.createdAt ?? new Date().toISOString(),
    updatedAt: new Date().toISOString(),
  };
  const email = prepareEmail(plan, contact, { extra: up.patch.transient, toName: recipient.name ?? null });
  const changed = subscriptionChangeCte(ctx.projectId);
  const written = await writeEmailWithContact(em, { sql: up.sql + changed.sql, params: [...up.params, ...changed.params] }, email);
  return written ? { emails: [{ contact: { id: contact.id, email: contact.email }, email: email.id }] } : { planned };
}
