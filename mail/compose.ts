import MailComposer from 'nodemailer/lib/mail-composer';
import { type DkimKey, dkimSignature, signMessage } from './dkim-sign';
import { htmlOnlyMessage, serializeMessage, withCrlf } from './mime';

export interface Address {
  name?: string;
  address: string;
}

export interface AttachmentFile {
  filename: string;
  /** base64 */
  content: string;
  contentType: string;
  contentId?: string;
  disposition?: 'attachment' | 'inline';
}

/** What nodemailer needs for one email, built from its stored row. */
export interface OutgoingMessage {
  messageId: string;
  /** The email row it was built from; absent for account mail, which has none. */
  emailId?: string;
  from: Address;
  to: Address;
  replyTo?: string;
  subject: string;
  html: string;
  /** Plain-text alternative (account mail has one). */
  text?: string;
  headers: Record<string, string>;
  attachments: { filename: string; content: Buffer; contentType: string; cid?: string; contentDisposition?: 'attachment' | 'inline' }[];
  dkim?: DkimKey;
}

/**
 * The envelope sender (MAIL FROM) of an email: its bounce address when its sending domain can take
 * one (db/domains/return-paths.ts), else undefined and the From address is used.
 */
export interface ReturnPath {
  mailFrom(emailId: string, fromAddress: string): string | undefined;
}

/** A message as it goes over SMTP: the final bytes (CRLF, signed) and who it goes from and to. */
export interface RenderedMessage {
  messageId: string;
  envelope: { from: string; to: string[] };
  raw: Buffer;
}

export interface StoredEmail {
  id: string;
  toEmail: string;
  toName: string | null;
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  subject: string;
  body: string;
  headers: Record<string, string>;
  attachments: AttachmentFile[];
}

export const domainOf = (email: string) => email.slice(email.lastIndexOf('@') + 1).toLowerCase();

/** The email id is the Message-ID's local part, so a message found anywhere leads back to its row. */
export const messageIdFor = (emailId: string, fromEmail: string) => `<${emailId}@${domainOf(fromEmail)}>`;

export function composeMessage(email: StoredEmail, dkim: DkimKey | undefined): OutgoingMessage {
  return {
    messageId: messageIdFor(email.id, email.fromEmail),
    emailId: email.id,
    from: { name: email.fromName ?? undefined, address: email.fromEmail },
    to: { name: email.toName ?? undefined, address: email.toEmail },
    ...(email.replyTo ? { replyTo: email.replyTo } : {}),
    // A variable may carry a line break into the subject; a header cannot hold one.
    subject: email.subject.replace(/[\r\n]+/g, ' '),
    html: email.body,
    headers: email.headers,
    attachments: email.attachments.map((a) => ({
      filename: a.filename,
      content: Buffer.from(a.content, 'base64'),
      contentType: a.contentType,
      ...(a.contentId ? { cid: a.contentId } : {}),
      ...(a.disposition ? { contentDisposition: a.disposition } : {}),
    })),
    ...(dkim ? { dkim } : {}),
  };
}

/**
 * The bytes to send. The common email (HTML only) is written by mail/mime.ts in one go;
 * anything else (a text alternative, attachments, an unusual address or header) by nodemailer's
 * MailComposer. Either is signed by mail/dkim-sign.ts.
 */
export async function renderMessage(message: OutgoingMessage, returnPath?: ReturnPath): Promise<RenderedMessage> {
  const { dkim, emailId, ...mail } = message;
  const { messageId } = mail;
  const bounceAddress = emailId === undefined ? undefined : returnPath?.mailFrom(emailId, message.from.address);
  const parts = htmlOnlyMessage(message);
  if (parts) {
    const raw = serializeMessage(parts, dkim && (await dkimSignature(parts, dkim)));
    return { messageId, envelope: { from: bounceAddress ?? message.from.address, to: [message.to.address] }, raw };
  }
  const node = new MailComposer(mail).compile();
  const envelope = node.getEnvelope();
  // The relay sees CRLF line breaks whatever MailComposer wrote (nodemailer's SMTP client converts
  // them); the signature has to be over those bytes.
  const raw = withCrlf(await node.build());
  return {
    messageId,
    envelope: { from: bounceAddress ?? (envelope.from || message.from.address), to: envelope.to },
    raw: dkim ? await signMessage(raw, dkim) : raw,
  };
}
