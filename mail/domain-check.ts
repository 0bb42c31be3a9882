import { dkimRecordName, type DnsRecord } from './dkim';
import { type DnsLookup, DnsLookupError } from './dns';
import { returnPathHost } from './inbound/bounce-address';

/** ok: published as expected; missing: no such record; mismatch: a record, but not ours; unreachable: DNS did not answer. */
export type RecordState = 'ok' | 'missing' | 'mismatch' | 'unreachable';

export interface DomainCheck {
  /** DKIM is what lets us sign for the domain, so it alone decides verification. */
  verified: boolean;
  /** True when DNS answered definitively; a timeout says nothing about the records. */
  conclusive: boolean;
  /**
   * The return-path host's MX (pointing at the receiver) and SPF are published: the domain's emails
   * may go from their bounce addresses. Not needed for verification (see docs/configuration.md).
   */
  returnPath: { ready: boolean; conclusive: boolean };
  records: { dkim: RecordState; spf: RecordState; dmarc: RecordState; returnPathMx: RecordState; returnPathSpf: RecordState };
}

/** Where a domain's bounce addresses live and which host its MX must name. */
export interface ReturnPathSettings {
  label: string;
  mxHost: string;
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

async function mxState(dns: DnsLookup, name: string, exchange: string): Promise<RecordState> {
  try {
    const values = await dns.mx(name);
    if (values.length === 0) return 'missing';
    return values.some((mx) => mx.exchange.replace(/\.$/, '').toLowerCase() === exchange) ? 'ok' : 'mismatch';
  } catch (err) {
    if (err instanceof DnsLookupError && err.kind === 'not_found') return 'missing';
    return 'unreachable';
  }
}

/**
 * The records of a domain's return-path host: an MX naming the receiver, so DSNs reach it, and SPF
 * that authorizes what the domain's own SPF does, since receivers check SPF on the envelope sender.
 */
export function returnPathRecords(domain: string, settings: ReturnPathSettings): DnsRecord[] {
  const host = returnPathHost(domain, settings.label);
  return [
    { type: 'MX', name: host, value: `10 ${settings.mxHost}`, purpose: 'return-path' },
    { type: 'TXT', name: host, value: `v=spf1 include:${domain} ~all`, purpose: 'return-path' },
  ];
}

const isSpf = (v: string) => v.trim().toLowerCase().startsWith('v=spf1');

export async function checkDomainRecords(
  dns: DnsLookup,
  domain: string,
  selector: string,
  publicKeyBase64: string,
  returnPath: ReturnPathSettings,
): Promise<DomainCheck> {
  const host = returnPathHost(domain, returnPath.label);
  const [dkim, spf, dmarc, returnPathMx, returnPathSpf] = await Promise.all([
    txtState(dns, dkimRecordName(domain, selector), (v) => dkimPublicKey(v) === publicKeyBase64),
    txtState(dns, domain, isSpf),
    txtState(dns, `_dmarc.${domain}`, (v) => v.trim().toUpperCase().startsWith('V=DMARC1')),
    mxState(dns, host, returnPath.mxHost),
    txtState(dns, host, isSpf),
  ]);
  return {
    verified: dkim === 'ok',
    conclusive: dkim !== 'unreachable',
    returnPath: { ready: returnPathMx === 'ok' && returnPathSpf === 'ok', conclusive: returnPathMx !== 'unreachable' && returnPathSpf !== 'unreachable' },
    records: { dkim, spf, dmarc, returnPathMx, returnPathSpf },
  };
}
