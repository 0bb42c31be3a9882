import type { Socket } from 'node:net';
import DNS from 'dns2';

/**
 * A real authoritative DNS server (npm `dns2`) on 127.0.0.1, UDP and TCP on the same port, answering
 * from a table the test changes at will. Point a resolver at `address`
 * (`new Resolver(); r.setServers([dns.address])`, or DNS_SERVERS=<address>).
 *
 *   const dns = await startDnsServer();
 *   dns.set('example.com', 'TXT', ['v=spf1 -all']);
 *   dns.set('example.com', 'MX', [{ exchange: 'mx.example.com', priority: 10 }]);
 *   dns.delayMs = 1_000;   // answers come late: a resolver with a shorter timeout sees ETIMEOUT
 *   await dns.close();
 *
 * Unknown names get NXDOMAIN (node: ENOTFOUND); a known name without records of the asked type
 * gets an empty NOERROR answer (node: ENODATA). Answers carry TTL 0, so a resolver that caches
 * (c-ares does) sees every change at once. TXT strings longer than 255 bytes are split into
 * character-strings as DNS requires (node's resolveTxt returns the chunks; join them). Responses
 * too big for UDP are truncated (TC) and the resolver retries over TCP, as with a real server.
 */

export type DnsRecordType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'NS' | 'CNAME';

export interface DnsRecordValues {
  A: string;
  AAAA: string;
  MX: { exchange: string; priority: number };
  /** One record: a string (split at 255 bytes) or its character-strings given explicitly. */
  TXT: string | string[];
  NS: string;
  CNAME: string;
}

export interface DnsQuery {
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
}

export interface DnsServer {
  /** '127.0.0.1:<port>' (UDP and TCP) */
  readonly address: string;
  readonly host: string;
  readonly port: number;
  /** Replaces the records of this type for the name. */
  set<T extends DnsRecordType>(name: string, type: T, values: DnsRecordValues[T][]): void;
  /** Without a type: the name disappears (NXDOMAIN). */
  remove(name: string, type?: DnsRecordType): void;
  clear(): void;
  /** Every answer waits this long (default 0); use it to make resolvers time out. */
  delayMs: number;
  /** Answer this name with an error code instead of the table (e.g. SERVFAIL); null removes it. */
  setRcode(name: string, rcode: 'SERVFAIL' | 'REFUSED' | 'NXDOMAIN' | null): void;
  /** Every question received, oldest first. */
  readonly queries: DnsQuery[];
  close(): Promise<void>;
}

const TYPE_NAMES = new Map<number, string>(Object.entries(DNS.Packet.TYPE).map(([name, code]) => [code as number, name]));
/** Response codes (RFC 1035 4.1.1); dns2 has them at runtime but not in its types. */
const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
const normalize = (name: string) => name.trim().toLowerCase().replace(/\.+$/, '');

function txtChunks(value: string | string[]): Buffer[] {
  if (Array.isArray(value)) return value.map((s) => Buffer.from(s, 'utf8'));
  const bytes = Buffer.from(value, 'utf8');
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) chunks.push(bytes.subarray(i, i + 255));
  return chunks.length ? chunks : [Buffer.alloc(0)];
}

export async function startDnsServer(opts: { delayMs?: number } = {}): Promise<DnsServer> {
  const host = '127.0.0.1';
  const zone = new Map<string, Map<DnsRecordType, unknown[]>>();
  const rcodes = new Map<string, number>();
  const queries: DnsQuery[] = [];
  const state = { delayMs: opts.delayMs ?? 0 };
  const pendingTimers = new Set<NodeJS.Timeout>();
  const tcpSockets = new Set<Socket>();

  const resource = (name: string, type: DnsRecordType, value: unknown) => {
    const base = { name, type: DNS.Packet.TYPE[type], class: DNS.Packet.CLASS.IN, ttl: 0 };
    switch (type) {
      case 'A':
      case 'AAAA':
        return { ...base, address: value as string };
      case 'MX': {
        const mx = value as DnsRecordValues['MX'];
        return { ...base, exchange: mx.exchange, priority: mx.priority };
      }
      case 'TXT':
        return { ...base, data: txtChunks(value as DnsRecordValues['TXT']) };
      case 'NS':
        return { ...base, ns: value as string };
      case 'CNAME':
        return { ...base, domain: value as string };
    }
  };

  const answer = (request: DNS.Packet, transport: 'udp' | 'tcp'): DNS.Packet => {
    const response = DNS.Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const [question] = request.questions;
    if (!question) {
      response.header.rcode = RCODE.FORMERR;
      return response;
    }
    const typeName = TYPE_NAMES.get(question.type) ?? String(question.type);
    queries.push({ name: question.name, type: typeName, transport });
    let name = normalize(question.name);
    const forced = rcodes.get(name);
    if (forced !== undefined) {
      response.header.rcode = forced;
      return response;
    }
    // Follow CNAMEs inside the table (a few hops), as an authoritative server for all of it would.
    let owner = question.name;
    for (let hop = 0; hop < 8; hop++) {
      const records = zone.get(name);
      if (!records) {
        if (hop === 0) response.header.rcode = RCODE.NXDOMAIN;
        return response;
      }
      const wanted = records.get(typeName as DnsRecordType);
      if (wanted?.length) {
        for (const v of wanted) response.answers.push(resource(owner, typeName as DnsRecordType, v) as never);
        return response;
      }
      const cname = records.get('CNAME')?.[0] as string | undefined;
      if (!cname || typeName === 'CNAME') return response;
      response.answers.push(resource(owner, 'CNAME', cname) as never);
      owner = cname;
      name = normalize(cname);
    }
    return response;
  };

  const handle =
    (transport: 'udp' | 'tcp') =>
    (request: DNS.Packet, send: (response: DNS.Packet) => unknown) => {
      let response: DNS.Packet;
      try {
        response = answer(request, transport);
      } catch {
        response = DNS.Packet.createResponseFromRequest(request);
        response.header.rcode = RCODE.SERVFAIL;
      }
      const reply = () => {
        try {
          void Promise.resolve(send(response)).catch(() => undefined);
        } catch {
          // the client went away
        }
      };
      if (state.delayMs <= 0) return reply();
      const timer = setTimeout(() => {
        pendingTimers.delete(timer);
        reply();
      }, state.delayMs);
      pendingTimers.add(timer);
    };

  // UDP on a free port, then TCP on the same number; if that one is taken for TCP, try another.
  let udp: DNS.UDPServer | undefined;
  let tcp: DNS.TCPServer | undefined;
  for (let attempt = 0; !tcp; attempt++) {
    const u = DNS.createUDPServer(handle('udp') as unknown as DNS.DnsHandler);
    u.on('requestError', () => undefined);
    await u.listen(0, host);
    const { port } = u.address();
    const t = DNS.createTCPServer(handle('tcp') as unknown as DNS.DnsHandler);
    t.on('requestError', () => undefined);
    t.on('connection', (socket: Socket) => {
      tcpSockets.add(socket);
      socket.on('close', () => tcpSockets.delete(socket));
    });
    const ok = await new Promise<boolean>((resolve) => {
      t.once('error', () => resolve(false));
      t.listen(port, host);
      t.once('listening', () => resolve(true));
    });
    if (ok) {
      udp = u;
      tcp = t;
    } else {
      u.close();
      if (attempt >= 10) throw new Error('could not find a port free for both UDP and TCP');
    }
  }
  const port = udp!.address().port;

  return {
    address: `${host}:${port}`,
    host,
    port,
    set(name, type, values) {
      const key = normalize(name);
      const records = zone.get(key) ?? new Map<DnsRecordType, unknown[]>();
      records.set(type, [...values]);
      zone.set(key, records);
    },
    remove(name, type) {
      const key = normalize(name);
      if (!type) return void zone.delete(key);
      const records = zone.get(key);
      records?.delete(type);
      if (records && records.size === 0) zone.delete(key);
    },
    clear() {
      zone.clear();
      rcodes.clear();
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
    setRcode(name, rcode) {
      if (rcode === null) rcodes.delete(normalize(name));
      else rcodes.set(normalize(name), RCODE[rcode]);
    },
    queries,
    async close() {
      for (const timer of pendingTimers) clearTimeout(timer);
      pendingTimers.clear();
      const closed = (server: { once(event: 'close', listener: () => void): unknown }) =>
        new Promise<void>((resolve) => server.once('close', () => resolve()));
      const done = Promise.all([closed(udp!), closed(tcp!)]);
      udp!.close();
      tcp!.close();
      // Idle client connections would otherwise hold the TCP server open for its idle timeout.
      for (const socket of tcpSockets) socket.destroy();
      await done;
    },
  };
}
