import { dkimRecordName } from './dkim';
import { type DnsLookup, DnsLookupError } from './dns';

/** ok: published as expected; missing: no such record; mismatch: a record, but not ours; unreachable: DNS did not answer. */
export type RecordState = 'ok' | 'missing' | 'mismatch' | 'unreachable';

export interface DomainCheck {
  /** DKIM is what lets us sign for the domain, so it alone decides verification. */
  verified: boolean;
  /** True when DNS answered definitively; a timeout says nothing about the records. */
  conclusive: boolean;
  records: { dkim: RecordState; spf: RecordState; dmarc: RecordState };
}

async function txtState(dns: DnsLookup, name: string, matches: (value: string) => boolean): Promise<RecordState> {
  try {
    const values = await dns.txt(name);
    if (values.length === 0) return 'missing';
    return values.some(matches) ? 'ok' : 'mismatch';
  } catch (err) {
    if (err instanceof DnsLookupError && err.kind === 'not_found') return 'missing';
    return 'unreachable';
  }
}

/**
 * The `p=` tag of a DKIM key record (RFC 6376 3.6.1), whitespace removed. Compared whole: a
 * substring test took `p=<our key>XYZ` (a different, broken key) for ours and verified the domain.
 */
function dkimPublicKey(record: string): string | undefined {
  for (const tag of record.split(';')) {
    const eq = tag.indexOf('=');
    if (eq >= 0 && tag.slice(0, eq).trim() === 'p') return tag.slice(eq + 1).replace(/\s+/g, '');
  }
  return undefined;
}

export async function checkDomainRecords(
  dns: DnsLookup,
  domain: string,
  selector: string,
  publicKeyBase64: string,
): Promise<DomainCheck> {
  const [dkim, spf, dmarc] = await Promise.all([
    txtState(dns, dkimRecordName(domain, selector), (v) => dkimPublicKey(v) === publicKeyBase64),
    txtState(dns, domain, (v) => v.trim().toLowerCase().startsWith('v=spf1')),
    txtState(dns, `_dmarc.${domain}`, (v) => v.trim().toUpperCase().startsWith('V=DMARC1')),
  ]);
  return { verified: dkim === 'ok', conclusive: dkim !== 'unreachable', records: { dkim, spf, dmarc } };
}
