import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import { type DnsLookup, DnsLookupError } from '../../mail/dns';

/**
 * SSRF guard for WEBHOOK steps. A webhook URL is chosen by a project's user, and the worker runs
 * inside the operator's network: without a check, a journey could read the cloud metadata service
 * (169.254.169.254), an admin port on localhost or anything else on the private network.
 *
 * The check resolves the host once (through the service's DnsLookup, so DNS_SERVERS applies) and
 * the request is then made to that very address (`pinnedLookup`): a name that answers a public
 * address to the check and a private one to the connection (DNS rebinding) gets nowhere.
 */

/** Why a target was refused; permanent (the rendered URL itself is the problem). */
export class WebhookTargetRefused extends Error {
  override name = 'WebhookTargetRefused';
}

/** The host could not be resolved now (DNS timeout / failure / no such name); worth retrying. */
export class WebhookResolveError extends Error {
  override name = 'WebhookResolveError';
}

export interface CheckedTarget {
  url: URL;
  /** Host name as sent in the Host header and TLS SNI (IPv6 without brackets). */
  hostname: string;
  /** The address to connect to: checked, and the only one the request may use. */
  address: string;
  family: 4 | 6;
}

// ---- Address ranges ---------------------------------------------------------------------------------

const v4 = (s: string) => s.split('.').reduce((n, part) => n * 256 + Number(part), 0);

/** Not publicly routable unicast IPv4: [network, prefix length]. */
const BLOCKED_V4: [number, number][] = (
  [
    ['0.0.0.0', 8], // "this network", incl. the unspecified 0.0.0.0
    ['10.0.0.0', 8], // private
    ['100.64.0.0', 10], // carrier-grade NAT
    ['127.0.0.0', 8], // loopback
    ['169.254.0.0', 16], // link-local (cloud metadata services)
    ['172.16.0.0', 12], // private
    ['192.0.0.0', 24], // IETF protocol assignments
    ['192.168.0.0', 16], // private
    ['198.18.0.0', 15], // benchmarking
    ['224.0.0.0', 4], // multicast
    ['240.0.0.0', 4], // reserved, incl. broadcast 255.255.255.255
  ] as const
).map(([net, bits]) => [v4(net), bits]);

function isBlockedV4(address: string): boolean {
  const n = v4(address);
  return BLOCKED_V4.some(([net, bits]) => Math.floor(n / 2 ** (32 - bits)) === Math.floor(net / 2 ** (32 - bits)));
}

/** The 8 groups of an IPv6 address (zone id dropped; an embedded dotted IPv4 tail is understood). */
function v6Groups(address: string): number[] | undefined {
  let s = address.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    if (!isIPv4(dotted[1]!)) return undefined;
    const n = v4(dotted[1]!);
    s = `${s.slice(0, dotted.index)}${Math.floor(n / 65536).toString(16)}:${(n % 65536).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 0) return undefined;
  const groups = [...head, ...Array<number>(fill).fill(0), ...tail];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

const embeddedV4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

function isBlockedV6(address: string): boolean {
  const g = v6Groups(address);
  if (!g) return true; // isIP said yes but we can't read it: refuse rather than guess
  const [g0, g1, g2, g3, g4, g5, g6, g7] = g as [number, number, number, number, number, number, number, number];
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroTo(8)) return true; // :: unspecified
  if (zeroTo(7) && g7 === 1) return true; // ::1 loopback
  if (zeroTo(5) && g5 === 0xffff) return isBlockedV4(embeddedV4(g6, g7)); // ::ffff:a.b.c.d IPv4-mapped
  if (zeroTo(6)) return isBlockedV4(embeddedV4(g6, g7)); // ::a.b.c.d IPv4-compatible (deprecated)
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return isBlockedV4(embeddedV4(g6, g7)); // NAT64
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return true; // local-use NAT64 64:ff9b:1::/48
  if (g0 === 0x2002) return isBlockedV4(embeddedV4(g1, g2)); // 6to4 carries an IPv4 address
  if (g0 === 0x0100 && g1 === 0 && g2 === 0 && g3 === 0) return true; // discard-only 100::/64
  if ((g0 & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local (private)
  if ((g0 & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((g0 & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated)
  if ((g0 & 0xff00) === 0xff00) return true; // ff00::/8 multicast
  return false;
}

/**
 * True for any address a webhook may not reach: private, loopback, link-local, unspecified, CGNAT,
 * multicast / reserved, and IPv6 forms that carry such an IPv4 address (mapped, NAT64, 6to4).
 * Anything that is not an IP address at all counts as blocked.
 */
export function isBlockedAddress(address: string): boolean {
  const bare = address.replace(/^\[(.*)\]$/, '$1');
  const kind = isIP(bare.replace(/%.*$/, ''));
  if (kind === 4) return isBlockedV4(bare);
  if (kind === 6) return isBlockedV6(bare);
  return true;
}

// ---- Target check -----------------------------------------------------------------------------------

async function resolveHost(dns: DnsLookup, hostname: string): Promise<{ address: string; family: 4 | 6 }[]> {
  const [a, aaaa] = await Promise.allSettled([dns.a(hostname), dns.aaaa(hostname)]);
  const addresses = [
    ...(a.status === 'fulfilled' ? a.value.filter((x) => isIPv4(x)).map((address) => ({ address, family: 4 as const })) : []),
    ...(aaaa.status === 'fulfilled' ? aaaa.value.filter((x) => isIPv6(x)).map((address) => ({ address, family: 6 as const })) : []),
  ];
  if (addresses.length > 0) return addresses;
  const failure = [a, aaaa].find((r): r is PromiseRejectedResult => r.status === 'rejected')?.reason as unknown;
  const why = failure instanceof DnsLookupError ? failure.code : failure instanceof Error ? failure.message : 'no A or AAAA records';
  throw new WebhookResolveError(`Could not resolve webhook host ${hostname}: ${why}`);
}

/**
 * Parses and checks a rendered webhook URL: http or https only, and (unless `allowPrivate`) every
 * address the host resolves to must be public — one private answer refuses the whole name, since
 * the attacker controls which answer is used. Throws WebhookTargetRefused (permanent) or
 * WebhookResolveError (DNS trouble, retryable).
 */
export async function checkWebhookTarget(rawUrl: string, opts: { dns: DnsLookup; allowPrivate: boolean }): Promise<CheckedTarget> {
  let url: URL;
  try {
    url = new URL(rawUrl.trim());
  } catch {
    throw new WebhookTargetRefused(`Invalid webhook URL: ${JSON.stringify(rawUrl.slice(0, 200))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new WebhookTargetRefused(`Webhook URLs must use http or https, not ${url.protocol.replace(/:$/, '')}`);
  }
  // WHATWG URL has already normalised odd IPv4 spellings (2130706433, 0x7f.1, 127.1) to dotted form.
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!hostname) throw new WebhookTargetRefused('Webhook URL has no host');

  const literal = isIP(hostname);
  const loopbackName = /(^|\.)localhost\.?$/i.test(hostname);
  const candidates: { address: string; family: 4 | 6 }[] =
    literal === 4 || literal === 6
      ? [{ address: hostname, family: literal }]
      : loopbackName
        ? // RFC 6761: localhost names are loopback whatever a DNS server says.
          [{ address: '127.0.0.1', family: 4 }]
        : await resolveHost(opts.dns, hostname);

  if (!opts.allowPrivate) {
    const blocked = candidates.find((c) => isBlockedAddress(c.address));
    if (blocked) {
      throw new WebhookTargetRefused(
        `Webhook target ${hostname}${blocked.address === hostname ? '' : ` (${blocked.address})`} is a private, loopback or otherwise non-public address`,
      );
    }
  }
  const chosen = candidates.find((c) => c.family === 4) ?? candidates[0]!;
  return { url, hostname, address: chosen.address, family: chosen.family };
}

/** A `lookup` for http(s).request / net.connect that answers only the checked address. */
export function pinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return ((
    _hostname: string,
    options: LookupOptions,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as LookupFunction;
}
