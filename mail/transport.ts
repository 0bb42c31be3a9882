import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import nodemailer from 'nodemailer';
import type { OutgoingMessage } from './compose';

export interface SendResult {
  /** The relay's reply, e.g. "250 2.0.0 Ok: queued as …". */
  response: string;
}

/** Sends one composed message; throws SmtpError on refusal or network failure. */
export interface Mailer {
  send(message: OutgoingMessage): Promise<SendResult>;
  close(): void;
}

export class SmtpError extends Error {
  constructor(
    message: string,
    readonly responseCode: number | undefined,
    /** A 5xx reply: sending again will not help. Everything else (4xx, network) is retried. */
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = 'SmtpError';
  }
}

function toSmtpError(err: unknown): SmtpError {
  const e = err as { message?: string; responseCode?: number };
  const code = typeof e.responseCode === 'number' ? e.responseCode : undefined;
  return new SmtpError(e.message ?? String(err), code, code !== undefined && code >= 500 && code < 600);
}

/** A pooled SMTP transport: connections are reused across messages and activities. */
export function createSmtpMailer(smtpUrl: string, opts: { maxConnections?: number } = {}): Mailer {
  const url = new URL(smtpUrl);
  url.searchParams.set('pool', 'true');
  url.searchParams.set('maxConnections', String(opts.maxConnections ?? 5));
  const transport = nodemailer.createTransport(url.toString());
  return {
    async send(message) {
      try {
        const info = await transport.sendMail(message);
        return { response: String(info.response ?? '') };
      } catch (err) {
        throw toSmtpError(err);
      }
    },
    close: () => transport.close(),
  };
}

/**
 * With no SMTP_URL (a local `npm start`), mail is written as .eml files instead of being sent,
 * so the whole send path runs and the result can be opened in any mail client.
 */
export function createOutboxMailer(dir: string): Mailer {
  mkdirSync(dir, { recursive: true });
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true });
  return {
    async send(message) {
      const info = await transport.sendMail(message);
      const file = path.join(dir, `${String(message.messageId).replace(/[<>@]/g, '_')}.eml`);
      writeFileSync(file, info.message as Buffer);
      return { response: `written to ${file}` };
    },
    close: () => transport.close(),
  };
}
