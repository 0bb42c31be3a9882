import { composeMessage, type StoredEmail } from './compose';
import { dkimKeyObject } from './dkim';
import { attemptSend, type SendOutcome } from './smtp-errors';
import type { Mailer } from './transport';

/** A sending domain's DKIM key as the database keeps it. */
export interface StoredDkimKey {
  domain: string;
  selector: string;
  privateKeyPem: string;
}

/**
 * Sends one stored email (signed with its domain's key, composed, handed to the relay) and tells
 * what became of it. Every sender of stored emails — the delivery engine, the retry workflow,
 * campaign batches — sends through here and maps the outcome to its own policy.
 */
export function sendStoredEmail(mailer: Mailer, email: StoredEmail, key: StoredDkimKey | null | undefined): Promise<SendOutcome> {
  // Inside attemptSend: a key that cannot be read is this email's failure, not the caller's.
  return attemptSend(() => {
    const dkim = key ? { domainName: key.domain, keySelector: key.selector, privateKey: dkimKeyObject(key.privateKeyPem) } : undefined;
    return mailer.send(composeMessage(email, dkim));
  });
}
