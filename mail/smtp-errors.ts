/**
 * What a relay said, or that it could not be reached: how every sender (the delivery engine,
 * campaign batches, system mail) tells a message to retry from one to give up on.
 */
export class SmtpError extends Error {
  constructor(
    message: string,
    readonly responseCode: number | undefined,
    /** A 5xx reply: sending again will not help. Everything else (4xx, network) is retried. */
    readonly permanent: boolean,
    /**
     * What failed, with nodemailer's names (the transport before mail/smtp-pool.ts, kept so stored
     * errors read the same): ECONNECTION, ETIMEDOUT, ESOCKET, ETLS, EAUTH (the session),
     * EENVELOPE (MAIL FROM, RCPT TO, DATA refused), EMESSAGE (the message refused after DATA).
     */
    readonly code?: string,
    /** The SMTP command (or stage) that failed: CONN (connecting, the greeting), MAIL FROM, RCPT TO, DATA, … */
    readonly command?: string,
  ) {
    super(message);
    this.name = 'SmtpError';
  }
}

/** A failed reply as an SmtpError: 5xx permanent, anything else worth another try. */
export const replyError = (message: string, reply: { code: number; text: string }, code: string, command: string) =>
  new SmtpError(`${message}: ${reply.text}`, reply.code, reply.code >= 500 && reply.code < 600, code, command);

/** Codes of a session that could not be opened or went away: nothing was said about the message. */
const SESSION_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ETLS', 'EPROXY', 'EAUTH', 'ENOAUTH']);

/**
 * A failure of the relay rather than of the message: 421 (the relay closing the channel,
 * whatever the command), or no reply at all with the session itself failing (refused or reset,
 * a timeout, no greeting, DNS, TLS, the pool closed). An error about the message with no reply
 * (EMESSAGE, EENVELOPE) says nothing about the relay. An error with no code keeps the old
 * reading: no reply, so unreachable.
 */
export function relayUnreachable(err: unknown): boolean {
  if (!(err instanceof SmtpError) || err.permanent) return false;
  if (err.responseCode === 421) return true;
  if (err.responseCode !== undefined) return false;
  return err.code === undefined || SESSION_CODES.has(err.code) || err.command === 'CONN';
}
