import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { type OutgoingMessage, renderMessage } from './compose';

export interface SendResult {
  /** The relay's reply, e.g. "250 2.0.0 Ok: queued as …". */
  response: string;
}

/**
 * Sends one message; throws SmtpError on refusal or network failure. Building the message
 * (renderMessage) happens before, so an error there is a plain Error, never one of the relay.
 */
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
    /** nodemailer's error code: ECONNECTION, ETIMEDOUT, ESOCKET, EDNS, EENVELOPE, EMESSAGE, ESTREAM, … */
    readonly code?: string,
    /** The SMTP command (or stage) that failed: CONN (connecting, the greeting), MAIL FROM, RCPT TO, DATA, … */
    readonly command?: string,
  ) {
    super(message);
    this.name = 'SmtpError';
  }
}

function toSmtpError(err: unknown): SmtpError {
  const e = err as { message?: string; responseCode?: number; code?: unknown; command?: unknown };
  const reply = typeof e.responseCode === 'number' ? e.responseCode : undefined;
  const str = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
  return new SmtpError(e.message ?? String(err), reply, reply !== undefined && reply >= 500 && reply < 600, str(e.code), str(e.command));
}

/** Codes of a session that could not be opened or went away: nothing was said about the message. */
const SESSION_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ETLS', 'EPROXY', 'EAUTH', 'ENOAUTH']);

/**
 * A failure of the relay rather than of the message: 421 (the relay closing the channel,
 * whatever the command), or no reply at all with the session itself failing (refused or reset,
 * a timeout, no greeting, DNS, TLS, the pool closed). An error about the message with no reply
 * (EMESSAGE: too big for the advertised SIZE; ESTREAM; EENVELOPE: an address the client
 * refused) says nothing about the relay. An error nodemailer gave no code keeps the old reading:
 * no reply, so unreachable.
 */
export function relayUnreachable(err: unknown): boolean {
  if (!(err instanceof SmtpError) || err.permanent) return false;
  if (err.responseCode === 421) return true;
  if (err.responseCode !== undefined) return false;
  return err.code === undefined || SESSION_CODES.has(err.code) || err.command === 'CONN';
}

/** A pooled SMTP transport: connections are reused across messages and activities. */
export function createSmtpMailer(smtpUrl: string, opts: { maxConnections?: number } = {}): Mailer {
  const url = new URL(smtpUrl);
  url.searchParams.set('pool', 'true');
  url.searchParams.set('maxConnections', String(opts.maxConnections ?? 5));
  const transport = nodemailer.createTransport(url.toString());
  return {
    async send(message) {
      const { envelope, raw } = await renderMessage(message);
      try {
        const info = await transport.sendMail({ envelope, raw });
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
