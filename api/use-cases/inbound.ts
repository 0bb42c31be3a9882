import type { Logger } from 'pino';
import { simpleParser } from 'mailparser';
import { upsertContact } from '../../db/contacts/contacts';
import { projectOfVerifiedDomain } from '../../db/domains/domains';
import { recordEvent } from '../../db/events/events';
import { recordBounce, recordComplaint } from '../../db/messages/engagement';
import { emailProject, projectEmailByMessageId } from '../../db/messages/inbound';
import type { Orm } from '../../db/orm';
import { transaction } from '../../db/sql';
import { domainOf } from '../../mail/compose';
import type { BounceAddresses } from '../../mail/inbound/bounce-address';
import type { InboundHandler } from '../../mail/inbound/receiver';
import { type InboundReport, readReport } from '../../mail/inbound/reports';
import { inboundKey, type ImageStorage } from '../../storage/storage';

/** An accepted recipient: one of our bounce addresses, or an address at a project's verified domain. */
export type InboundRecipient = { kind: 'bounce'; emailId: string; projectId: string } | { kind: 'mailbox'; projectId: string };

export interface InboundDeps {
  orm: Orm;
  storage: ImageStorage;
  bounces: BounceAddresses;
  logger: Logger;
}

/** The text kept in an `email.received` event; the whole message is in storage. */
const MAX_EVENT_TEXT = 20_000;

/**
 * What the service does with mail it receives (mail/inbound/receiver.ts):
 * - to a bounce address: a DSN bounces that email (hard or soft by its Action and Status), an ARF
 *   report is a complaint about it (both as POST /webhooks/notify records them); anything else
 *   (an auto-reply) is dropped;
 * - to an address at a project's verified domain: a report that returns one of the project's
 *   emails is applied the same way; any other message is `email.received` on the contact who sent
 *   it (created, not subscribed, if new), its raw bytes kept in storage.
 */
export function inboundHandler(deps: InboundDeps): InboundHandler<InboundRecipient> {
  const em = () => deps.orm.em.fork();
  return {
    async recipient(address) {
      const bounce = deps.bounces.parse(address);
      if (bounce) {
        const projectId = await emailProject(em(), bounce.emailId);
        return projectId === undefined ? undefined : { kind: 'bounce', emailId: bounce.emailId, projectId };
      }
      const projectId = await projectOfVerifiedDomain(em(), domainOf(address));
      return projectId === undefined ? undefined : { kind: 'mailbox', projectId };
    },

    async deliver({ raw, mailFrom, recipients }) {
      const report = readReport(raw);
      const done = new Set<string>();
      for (const r of recipients) {
        // Once per email, and once per project for the mailboxes (a message to two addresses is one reply).
        const key = r.kind === 'bounce' ? r.emailId : r.projectId;
        if (done.has(key)) continue;
        done.add(key);
        if (r.kind === 'bounce') await applyReport(r.emailId, report);
        else await toMailbox(r.projectId, raw, mailFrom, report);
      }
    },
  };

  async function applyReport(emailId: string, report: InboundReport): Promise<void> {
    if (report.kind === 'bounce') {
      await recordBounce(em(), emailId, report.bounceType, { diagnostic: report.diagnostic ?? report.status });
    } else if (report.kind === 'complaint') {
      await recordComplaint(em(), emailId);
    } else {
      deps.logger.info({ emailId, report: report.kind }, 'inbound: message to a bounce address reports nothing; dropped');
    }
  }

  async function toMailbox(projectId: string, raw: Buffer, mailFrom: string, report: InboundReport): Promise<void> {
    if (report.kind === 'bounce' || report.kind === 'complaint') {
      const emailId = report.originalMessageId && (await projectEmailByMessageId(em(), projectId, [report.originalMessageId]));
      if (emailId) await applyReport(emailId, report);
      else deps.logger.info({ projectId, report: report.kind }, 'inbound: report about no email of the project; dropped');
      return;
    }
    if (report.kind === 'other-report') return;
    await recordReceived(projectId, raw, mailFrom);
  }

  async function recordReceived(projectId: string, raw: Buffer, mailFrom: string): Promise<void> {
    const parsed = await simpleParser(raw, { skipHtmlToText: false, skipImageLinks: true, skipTextLinks: true });
    const from = parsed.from?.value.find((a) => a.address)?.address ?? mailFrom;
    if (!from) {
      deps.logger.info({ projectId }, 'inbound: message with no sender address; dropped');
      return;
    }
    const references = [parsed.inReplyTo, ...(Array.isArray(parsed.references) ? parsed.references : [parsed.references])].filter(
      (id): id is string => typeof id === 'string',
    );
    const answered = await projectEmailByMessageId(em(), projectId, references);
    const rawKey = inboundKey(projectId);
    await deps.storage.keepInbound(rawKey, raw);
    const text = (parsed.text ?? '').slice(0, MAX_EVENT_TEXT);
    await transaction(em(), async (tx) => {
      const { contact } = await upsertContact(tx, projectId, { email: from }, { subscribedWhenNew: false });
      await recordEvent(tx, projectId, contact.id, 'email.received', {
        from,
        subject: parsed.subject ?? '',
        text,
        ...(parsed.messageId ? { messageId: parsed.messageId } : {}),
        ...(answered ? { emailId: answered } : {}),
        rawKey,
        rawBytes: raw.length,
      });
    });
  }
}
