import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type OutgoingMessage, renderMessage, type ReturnPath } from './compose';
import { SmtpPool, smtpOptionsFromUrl } from './smtp-pool';

export interface SendResult {
  /** The relay's reply, e.g. "250 2.0.0 Ok: queued as …". */
  response: string;
}

/**
 * Sends one message; throws SmtpError (mail/smtp-errors.ts) on refusal or network failure. Building the message
 * (renderMessage) happens before, so an error there is a plain Error, never one of the relay.
 */
export interface Mailer {
  send(message: OutgoingMessage): Promise<SendResult>;
  close(): void;
}

/**
 * The relay at `smtpUrl` through a pool of pipelined connections (mail/smtp-pool.ts), shared by every send of the process.
 * With `returnPath`, an email goes from its bounce address where its domain can take one.
 */
export function createSmtpMailer(smtpUrl: string, returnPath?: ReturnPath): Mailer {
  const pool = new SmtpPool(smtpOptionsFromUrl(smtpUrl));
  return {
    async send(message) {
      const { envelope, raw } = await renderMessage(message, returnPath);
      return { response: await pool.send(envelope.from, envelope.to, raw) };
    },
    close: () => pool.close(),
  };
}

/**
 * With no SMTP_URL (a local `npm start`), mail is written as .eml files instead of being sent,
 * so the whole send path runs and the result can be opened in any mail client.
 */
export function createOutboxMailer(dir: string): Mailer {
  mkdirSync(dir, { recursive: true });
  return {
    async send(message) {
      const { messageId, raw } = await renderMessage(message);
      const file = path.join(dir, `${messageId.replace(/[<>@]/g, '_')}.eml`);
      writeFileSync(file, raw);
      return { response: `written to ${file}` };
    },
    close: () => undefined,
  };
}
