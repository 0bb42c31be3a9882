import { hostname } from 'node:os';
import { SmtpError } from './smtp-errors';
import { type SmtpOptions, SmtpSession } from './smtp-session';

export interface SmtpPoolOptions extends SmtpOptions {
  /** Connections open at once; more sends wait for one. */
  maxConnections: number;
  /** Transactions per connection before it is replaced (relays cap them). */
  maxMessages: number;
  /** An unused connection is closed (with QUIT) after this long. */
  idleTimeoutMs: number;
}

const DEFAULTS = {
  // Ten, not nodemailer's five: a campaign's lanes and the delivery engines' waited for a
  // connection (bench/campaign.ts: 1,175 emails/s on 5, 1,323 on 10).
  maxConnections: 10,
  maxMessages: 100,
  idleTimeoutMs: 30_000,
  connectionTimeoutMs: 60_000,
  // RFC 5321 4.5.3.2.6 gives the reply to the end of the content 10 minutes (the relay may scan it); nodemailer's default too.
  socketTimeoutMs: 600_000,
};

/** Query parameters SMTP_URL takes (nodemailer's names, so a URL written for it keeps working). */
const PARAMETERS = [
  'pool',
  'secure',
  'requireTLS',
  'ignoreTLS',
  'name',
  'maxConnections',
  'maxMessages',
  'connectionTimeout',
  'socketTimeout',
  'tls.rejectUnauthorized',
  'tls.servername',
] as const;

/**
 * SMTP_URL as connection options: smtp://user:pass@host:port (STARTTLS when offered) or
 * smtps://… (TLS from the start), with the query parameters in PARAMETERS. Throws an Error naming
 * what is wrong, for config.ts to report at startup.
 */
export function smtpOptionsFromUrl(smtpUrl: string): SmtpPoolOptions {
  let url: URL;
  try {
    url = new URL(smtpUrl);
  } catch {
    throw new Error('must be a URL such as smtp://user:pass@host:587');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') throw new Error(`must start with smtp:// or smtps://, not ${url.protocol}//`);
  if (!url.hostname) throw new Error('names no host');
  const params = url.searchParams;
  const unknown = [...params.keys()].filter((k) => !(PARAMETERS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new Error(`unknown parameter ${unknown.join(', ')} (known: ${PARAMETERS.join(', ')})`);
  const flag = (name: string) => {
    const v = params.get(name);
    if (v === null) return undefined;
    if (v === 'true' || v === '1' || v === '') return true;
    if (v === 'false' || v === '0') return false;
    throw new Error(`${name} must be true or false, not "${v}"`);
  };
  const count = (name: string, fallback: number) => {
    const v = params.get(name);
    if (v === null) return fallback;
    if (!/^\d+$/.test(v) || Number(v) < 1) throw new Error(`${name} must be a positive whole number, not "${v}"`);
    return Number(v);
  };
  const secure = flag('secure') ?? url.protocol === 'smtps:';
  if (flag('requireTLS') && flag('ignoreTLS')) throw new Error('requireTLS and ignoreTLS contradict each other');
  const user = decodeURIComponent(url.username);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    startTls: flag('requireTLS') ? 'required' : flag('ignoreTLS') ? 'never' : 'offered',
    tls: {
      rejectUnauthorized: flag('tls.rejectUnauthorized') ?? true,
      ...(params.get('tls.servername') ? { servername: params.get('tls.servername')! } : {}),
    },
    ...(user ? { auth: { user, pass: decodeURIComponent(url.password) } } : {}),
    clientName: params.get('name') || hostname() || 'localhost',
    maxConnections: count('maxConnections', DEFAULTS.maxConnections),
    maxMessages: count('maxMessages', DEFAULTS.maxMessages),
    idleTimeoutMs: DEFAULTS.idleTimeoutMs,
    connectionTimeoutMs: count('connectionTimeout', DEFAULTS.connectionTimeoutMs),
    socketTimeoutMs: count('socketTimeout', DEFAULTS.socketTimeoutMs),
  };
}

/**
 * Connections to one relay shared by every send of the process: up to maxConnections, opened on
 * demand, reused most-recent first (so a quiet pool shrinks), replaced after maxMessages and
 * closed after idleTimeoutMs unused.
 */
export class SmtpPool {
  private readonly idle: { session: SmtpSession; since: number }[] = [];
  private readonly queue: (() => void)[] = [];
  private open = 0;
  private closed = false;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SmtpPoolOptions) {}

  /**
   * Resolves with the relay's reply to the content; throws SmtpError. With PIPELINING the
   * connection goes back to the pool as soon as the content is written, so the next message's
   * commands follow it before the relay's reply (mail/smtp-session.ts).
   */
  async send(from: string, to: string[], raw: Buffer): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      const { session, reused } = await this.acquire();
      let written = false;
      let released = false;
      const release = () => {
        if (!released) this.release(session);
        released = true;
      };
      try {
        return await session.send(from, to, raw, () => {
          written = true;
          if (session.pipelining) release();
        });
      } catch (err) {
        // A kept connection the relay dropped while it sat idle (or under a transaction pipelined
        // before it): nothing of this message left, so it goes once more on a new connection
        // instead of counting as the relay being down.
        const stale = reused && !written && err instanceof SmtpError && err.responseCode === undefined;
        if (!stale || attempt > 1) throw err;
      } finally {
        release();
      }
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const { session } of this.idle.splice(0)) session.close();
    for (const wake of this.queue.splice(0)) wake();
  }

  private async acquire(): Promise<{ session: SmtpSession; reused: boolean }> {
    for (;;) {
      if (this.closed) throw new SmtpError('The mailer is closed', undefined, false, 'ECONNECTION', 'CONN');
      const kept = this.idle.pop();
      if (kept) {
        if (kept.session.usable) return { session: kept.session, reused: true };
        continue; // its onGone already gave its place back
      }
      if (this.open < this.opts.maxConnections) {
        this.open++;
        try {
          const session = await SmtpSession.open(this.opts);
          session.onGone = () => this.forget(session);
          return { session, reused: false };
        } catch (err) {
          this.open--;
          this.wakeOne();
          throw err;
        }
      }
      await new Promise<void>((resolve) => this.queue.push(resolve));
    }
  }

  private release(session: SmtpSession): void {
    if (!session.usable) return; // forget() did the rest
    if (this.closed || session.messages >= this.opts.maxMessages) {
      session.close();
      return;
    }
    this.idle.push({ session, since: Date.now() });
    this.sweeper ??= setInterval(() => this.sweep(), Math.min(this.opts.idleTimeoutMs, 5_000)).unref();
    this.wakeOne();
  }

  /** A connection that failed or was closed gives its place to the next waiting send. */
  private forget(session: SmtpSession): void {
    this.open--;
    const i = this.idle.findIndex((x) => x.session === session);
    if (i >= 0) this.idle.splice(i, 1);
    this.wakeOne();
  }

  private wakeOne(): void {
    this.queue.shift()?.();
  }

  private sweep(): void {
    const cutoff = Date.now() - this.opts.idleTimeoutMs;
    // Least recently used first: idle is in release order.
    while (this.idle.length > 0 && this.idle[0]!.since < cutoff) this.idle.shift()!.session.close();
    if (this.idle.length === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
