import type { KeyObject } from 'node:crypto';

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
  from: Address;
  to: Address;
  replyTo?: string;
  subject: string;
  html: string;
  /** Plain-text alternative (account mail has one). */
  text?: string;
  headers: Record<string, string>;
  attachments: { filename: string; content: Buffer; contentType: string; cid?: string; contentDisposition?: 'attachment' | 'inline' }[];
  dkim?: { domainName: string; keySelector: string; privateKey: KeyObject };
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

export function composeMessage(
  email: StoredEmail,
  dkim: { domainName: string; keySelector: string; privateKey: KeyObject } | undefined,
): OutgoingMessage {
  return {
    messageId: messageIdFor(email.id, email.fromEmail),
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
