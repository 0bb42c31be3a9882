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
    /** The reply's enhanced status code (RFC 3463), e.g. `5.1.1`, when it had one. */
    readonly enhancedCode?: string,
  ) {
    super(message);
    this.name = 'SmtpError';
  }
}

/** A failed reply as an SmtpError: 5xx permanent, anything else worth another try. */
export const replyError = (message: string, reply: { code: number; text: string }, code: string, command: string) =>
  new SmtpError(
    `${message}: ${reply.text}`,
    reply.code,
    reply.code >= 500 && reply.code < 600,
    code,
    command,
    /^\d{3}[ -]([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/.exec(reply.text)?.[1],
  );

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

/**
 * What became of one message handed to the relay, as every sender reads it (the delivery engine,
 * the per-email retry workflow, campaign batches); each maps it to its own policy.
 * - `sent`: accepted, with the reply.
 * - `bounced`: a hard bounce. A 5xx to RCPT TO or to the message (at or after DATA): the
 *   recipient's side will not take it, ever (RFC 3463 class 5).
 * - `rejected`: a 5xx that says nothing of the recipient — to MAIL FROM or the session, or a
 *   message refused for its size or content (`5.3.x`, `5.6.x`, a bare 552 after DATA): the email
 *   fails, the address stays mailable.
 * - `transient`: a 4xx, or a message the session dropped: worth another try. `reply` is what the
 *   relay (or the session with it) said; null when the failure was not the relay's (composing the
 *   message, writing the outbox). `answered`: the relay replied, so it is up.
 * - `unreachable`: the relay itself could not be reached (relayUnreachable).
 */
export type SendOutcome =
  | { kind: 'sent'; reply: string }
  | { kind: 'bounced' | 'rejected'; reply: string; error: SmtpError }
  | { kind: 'transient'; reply: string | null; message: string; answered: boolean; error: unknown }
  | { kind: 'unreachable'; reply: string; error: SmtpError };

/** Sends (composing inside, so a message that cannot be built is that message's failure) and tells what became of it. */
export async function attemptSend(send: () => Promise<{ response: string }>): Promise<SendOutcome> {
  try {
    return { kind: 'sent', reply: (await send()).response };
  } catch (err) {
    return failureOutcome(err);
  }
}

/** The outcome of a send that threw `err` (attemptSend). */
function failureOutcome(err: unknown): Exclude<SendOutcome, { kind: 'sent' }> {
  if (err instanceof SmtpError && err.permanent) {
    return { kind: refusesRecipient(err) ? 'bounced' : 'rejected', reply: err.message, error: err };
  }
  if (err instanceof SmtpError && relayUnreachable(err)) return { kind: 'unreachable', reply: err.message, error: err };
  const message = err instanceof Error ? err.message : String(err);
  return {
    kind: 'transient',
    reply: err instanceof SmtpError ? message : null,
    message,
    answered: err instanceof SmtpError && err.responseCode !== undefined,
    error: err,
  };
}

/** A permanent refusal of this recipient or of mail to it, rather than of the sender, the session or this message's size or content. */
function refusesRecipient(err: SmtpError): boolean {
  if (err.command !== 'RCPT TO' && err.command !== 'DATA') return false;
  if (err.enhancedCode) return !/^5\.[36]\./.test(err.enhancedCode);
  return !(err.command === 'DATA' && err.responseCode === 552);
}
