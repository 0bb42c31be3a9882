import { Resolver } from 'node:dns/promises';

/**
 * The one DNS resolver of the service: domain verification and address checks both go through
 * it, so DNS_SERVERS (and the test DNS server) apply everywhere.
 */
export interface DnsLookup {
  txt(name: string): Promise<string[]>;
  mx(name: string): Promise<{ exchange: string; priority: number }[]>;
  ns(name: string): Promise<string[]>;
  a(name: string): Promise<string[]>;
  aaaa(name: string): Promise<string[]>;
}

/** What a failed lookup meant: the name does not exist / has no such record, or we could not tell. */
export type DnsFailure = 'not_found' | 'timeout' | 'error';

export class DnsLookupError extends Error {
  constructor(
    readonly kind: DnsFailure,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const NOT_FOUND_CODES = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN', 'ENONAME']);
const TIMEOUT_CODES = new Set(['ETIMEOUT', 'ETIMEDOUT', 'ECONNREFUSED']);

function classify(err: unknown, name: string, type: string): DnsLookupError {
  const code = (err as { code?: string }).code ?? 'EUNKNOWN';
  const kind: DnsFailure = NOT_FOUND_CODES.has(code) ? 'not_found' : TIMEOUT_CODES.has(code) ? 'timeout' : 'error';
  return new DnsLookupError(kind, code, `${type} lookup of ${name} failed: ${code}`);
}

export function createDnsLookup(opts: { servers: string[]; timeoutMs?: number; tries?: number }): DnsLookup {
  const resolver = new Resolver({ timeout: opts.timeoutMs ?? 3000, tries: opts.tries ?? 2 });
  if (opts.servers.length > 0) resolver.setServers(opts.servers);
  const wrap =
    <T>(type: string, fn: (name: string) => Promise<T>) =>
    async (name: string): Promise<T> => {
      try {
        return await fn(name);
      } catch (err) {
        throw classify(err, name, type);
      }
    };
  return {
    txt: wrap('TXT', async (name) => (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''))),
    // Only these two fields, on every Node: Node 24's resolver adds `type: 'MX'` to each record.
    mx: wrap('MX', async (name) => (await resolver.resolveMx(name)).map(({ exchange, priority }) => ({ exchange, priority }))),
    ns: wrap('NS', (name) => resolver.resolveNs(name)),
    a: wrap('A', (name) => resolver.resolve4(name)),
    aaaa: wrap('AAAA', (name) => resolver.resolve6(name)),
  };
}
