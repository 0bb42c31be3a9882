import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed, unguessable tokens for a contact's unsubscribe / subscribe / manage links. The token
 * carries the contact id and an HMAC over it, so no lookup table is needed and no id can be forged.
 */
export type LinkPurpose = 'subscription';

function mac(secret: string, purpose: LinkPurpose, contactId: string): string {
  return createHmac('sha256', secret).update(`${purpose}:${contactId}`).digest('base64url');
}

export function signContactToken(secret: string, contactId: string, purpose: LinkPurpose = 'subscription'): string {
  return `${Buffer.from(contactId, 'utf8').toString('base64url')}.${mac(secret, purpose, contactId)}`;
}

/** The contact id, or null for a token that was not signed by this instance. */
export function verifyContactToken(secret: string, token: string, purpose: LinkPurpose = 'subscription'): string | null {
  // Exactly the form signContactToken makes: Node's base64 decoder skips characters it does not
  // know and split() ignored a third part, so altered tokens ("id!x.sig", "id.sig.junk") passed.
  const parts = token.split('.');
  if (parts.length !== 2) return null;
  const [idPart, sig] = parts as [string, string];
  if (!idPart || !sig) return null;
  const contactId = Buffer.from(idPart, 'base64url').toString('utf8');
  if (Buffer.from(contactId, 'utf8').toString('base64url') !== idPart) return null;
  const expected = Buffer.from(mac(secret, purpose, contactId));
  const given = Buffer.from(sig);
  return expected.length === given.length && timingSafeEqual(expected, given) ? contactId : null;
}

export interface ContactUrls {
  unsubscribeUrl: string;
  subscribeUrl: string;
  manageUrl: string;
}

export function contactUrls(publicUrl: string, secret: string, contactId: string): ContactUrls {
  const token = signContactToken(secret, contactId);
  return {
    unsubscribeUrl: `${publicUrl}/unsubscribe/${token}`,
    subscribeUrl: `${publicUrl}/subscribe/${token}`,
    manageUrl: `${publicUrl}/manage/${token}`,
  };
}
