import { createPrivateKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateKeyPair);

export const DKIM_SELECTOR = 'tidings';

export interface DkimKeyPair {
  selector: string;
  privateKeyPem: string;
  /** Base64 of the DER SubjectPublicKeyInfo: the `p=` value of the DKIM TXT record. */
  publicKeyBase64: string;
}

export async function generateDkimKeyPair(): Promise<DkimKeyPair> {
  const { privateKey, publicKey } = await generateKeyPairAsync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { selector: DKIM_SELECTOR, privateKeyPem: privateKey, publicKeyBase64: publicKey.toString('base64') };
}

export interface DnsRecord {
  type: 'TXT' | 'MX' | 'CNAME';
  name: string;
  value: string;
  purpose: 'dkim' | 'spf' | 'dmarc' | 'return-path';
}

export const dkimRecordName = (domain: string, selector: string) => `${selector}._domainkey.${domain}`;
export const dkimRecordValue = (publicKeyBase64: string) => `v=DKIM1; k=rsa; p=${publicKeyBase64}`;

/** The records a domain owner publishes before mail from the domain is accepted for sending. */
export function domainRecords(domain: string, selector: string, publicKeyBase64: string): DnsRecord[] {
  return [
    { type: 'TXT', name: dkimRecordName(domain, selector), value: dkimRecordValue(publicKeyBase64), purpose: 'dkim' },
    { type: 'TXT', name: domain, value: 'v=spf1 a mx ~all', purpose: 'spf' },
    { type: 'TXT', name: `_dmarc.${domain}`, value: 'v=DMARC1; p=none', purpose: 'dmarc' },
  ];
}

// Parsing a PEM costs more than signing with it; keep one KeyObject per key.
const keyCache = new Map<string, KeyObject>();

export function dkimKeyObject(privateKeyPem: string): KeyObject {
  let key = keyCache.get(privateKeyPem);
  if (!key) {
    key = createPrivateKey(privateKeyPem);
    keyCache.set(privateKeyPem, key);
  }
  return key;
}
