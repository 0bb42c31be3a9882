import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * VERP: every email goes out with an envelope sender of its own,
 * `bounce+<email id>.<signature>@<label>.<sending domain>`, so a DSN leads back to its email by the
 * address it was sent to, whatever the reporting MTA kept of the original. The signature (an HMAC
 * of the id and the host, 64 bits) stops anyone from making up addresses that bounce our emails.
 * The host is a subdomain of the From domain: SPF checked on it aligns under relaxed DMARC.
 */

const LOCAL = /^bounce\+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([0-9a-f]{16})$/;

export const returnPathHost = (domain: string, label: string) => `${label}.${domain.toLowerCase()}`;

export class BounceAddresses {
  constructor(
    private readonly secret: string,
    readonly label: string,
  ) {}

  /** The bounce address of an email sent from `fromDomain`. */
  addressFor(emailId: string, fromDomain: string): string {
    const host = returnPathHost(fromDomain, this.label);
    const id = emailId.toLowerCase();
    return `bounce+${id}.${this.signature(id, host)}@${host}`;
  }

  /**
   * The email id of a bounce address, with the sending domain it was made for; undefined for
   * anything we did not sign. Local parts are compared lower-cased: some MTAs change their case.
   */
  parse(address: string): { emailId: string; domain: string } | undefined {
    const at = address.lastIndexOf('@');
    if (at < 0) return undefined;
    const host = address.slice(at + 1).toLowerCase();
    const match = LOCAL.exec(address.slice(0, at).toLowerCase());
    if (!match || !host.startsWith(`${this.label}.`)) return undefined;
    const [, emailId, given] = match as unknown as [string, string, string];
    const expected = Buffer.from(this.signature(emailId, host));
    if (!timingSafeEqual(Buffer.from(given), expected)) return undefined;
    return { emailId, domain: host.slice(this.label.length + 1) };
  }

  private signature(emailId: string, host: string): string {
    return createHmac('sha256', this.secret).update(`${emailId}@${host}`).digest('hex').slice(0, 16);
  }
}
