import net from 'node:net';
import tls from 'node:tls';
import { replyError, SmtpError } from './smtp-errors';

/** How to reach the relay: mail/smtp-pool.ts reads these from SMTP_URL. */
export interface SmtpOptions {
  host: string;
  port: number;
  /** TLS from the first byte (smtps://, port 465). */
  secure: boolean;
  /** STARTTLS on a plain connection: when the relay offers it, always (fail without it), or never. */
  startTls: 'offered' | 'required' | 'never';
  tls: { rejectUnauthorized: boolean; servername?: string };
  auth?: { user: string; pass: string };
  /** The name this client gives in EHLO. */
  clientName: string;
  /** Connecting through the greeting. */
  connectionTimeoutMs: number;
  /** Silence on an open connection, waiting for a reply. */
  socketTimeoutMs: number;
}

export interface Reply {
  code: number;
  /** The whole reply as the relay wrote it, lines joined by "\n" ("250 2.0.0 Ok: queued as …"). */
  text: string;
}

const CRLF = Buffer.from('\r\n');
const END_OF_DATA = Buffer.from('.\r\n');
const DOT = Buffer.from('.');

/**
 * The message as it goes after DATA: a line starting with "." gets another (RFC 5321 4.5.2), the
 * last line ends in CRLF, then the lone dot. `raw` already has CRLF line breaks.
 */
export function dataPayload(raw: Buffer): Buffer[] {
  const parts: Buffer[] = [];
  let start = 0;
  if (raw[0] === 0x2e) parts.push(DOT);
  for (let i = raw.indexOf('\n.'); i !== -1; i = raw.indexOf('\n.', start)) {
    parts.push(raw.subarray(start, i + 1), DOT);
    start = i + 1;
  }
  parts.push(start === 0 ? raw : raw.subarray(start));
  if (raw.length < 2 || raw[raw.length - 2] !== 0x0d || raw[raw.length - 1] !== 0x0a) parts.push(CRLF);
  parts.push(END_OF_DATA);
  return parts;
}

/**
 * One SMTP connection to the relay, past EHLO, STARTTLS and AUTH. With PIPELINING (RFC 2920) a
 * message goes in two writes: MAIL FROM, RCPT TO and DATA together, then the content; and the
 * next message's commands may follow its content before the relay answered it (RFC 2920 3.1: the
 * content may begin a group), so a busy connection waits one round trip per message instead of
 * two. The replies come in the order asked, so each transaction takes its own. Nodemailer's client,
 * which this replaces for sending, waits on each command and streams the content through a chain
 * of transforms: after the DKIM signature, it was the largest cost of a campaign email in node.
 */
export class SmtpSession {
  private socket: net.Socket;
  private received = '';
  private lines: string[] = [];
  private waiting: { resolve: (r: Reply) => void; reject: (e: Error) => void }[] = [];
  private failure: SmtpError | undefined;
  /** The stage named in an error that has no reply of its own. */
  private stage = 'CONN';
  private extensions = new Set<string>();
  /** Transactions begun on this connection. */
  messages = 0;
  /** close() was called with replies still to come: QUIT follows the last of them. */
  private closing = false;
  /** Called once, when the connection fails or closes: the pool forgets it. */
  onGone: (() => void) | undefined;
  /** Rejects with the failure, for waits that are not replies (the TLS handshake). */
  private readonly broken: Promise<never>;
  private rejectBroken!: (err: SmtpError) => void;

  private constructor(private readonly opts: SmtpOptions) {
    this.broken = new Promise<never>((_, reject) => (this.rejectBroken = reject));
    this.broken.catch(() => undefined); // observed through reply() and upgrade()
    this.socket = opts.secure
      ? tls.connect({ host: opts.host, port: opts.port, ...this.tlsOptions() })
      : net.connect({ host: opts.host, port: opts.port });
    this.attach(this.socket);
  }

  /** A connection ready for MAIL FROM; throws SmtpError (command CONN, or AUTH …). */
  static async open(opts: SmtpOptions): Promise<SmtpSession> {
    const session = new SmtpSession(opts);
    const timer = setTimeout(
      () => session.fail(new SmtpError(`Connection timeout: no greeting from ${opts.host}:${opts.port} in ${opts.connectionTimeoutMs} ms`, undefined, false, 'ETIMEDOUT', 'CONN')),
      opts.connectionTimeoutMs,
    );
    try {
      await session.handshake();
      return session;
    } catch (err) {
      session.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  get usable(): boolean {
    return this.failure === undefined && !this.closing;
  }

  /** Whether the next transaction may begin before the relay answered this one's content. */
  get pipelining(): boolean {
    return this.extensions.has('PIPELINING');
  }

  /**
   * Sends one message; resolves with the relay's 2xx reply to its content, throws SmtpError.
   * `contentWritten` is called once the content is on its way (from then on a failure may follow
   * a delivery) and this transaction holds its place among the replies: with PIPELINING, the next
   * transaction may begin.
   */
  async send(from: string, to: string[], raw: Buffer, contentWritten?: () => void): Promise<string> {
    this.messages++;
    const utf8 = this.extensions.has('SMTPUTF8') && /[^\x00-\x7f]/.test(from + to.join(''));
    const commands: [string, string, string][] = [
      [`MAIL FROM:<${from}>${utf8 ? ' SMTPUTF8' : ''}`, 'MAIL FROM', 'Mail command failed'],
      ...to.map((rcpt): [string, string, string] => [`RCPT TO:<${rcpt}>`, 'RCPT TO', 'Recipient command failed']),
      ['DATA', 'DATA', 'Data command failed'],
    ];
    const replies: Reply[] = [];
    let refused: SmtpError | undefined;
    if (this.extensions.has('PIPELINING')) {
      this.stage = 'MAIL FROM';
      this.write(commands.map(([line]) => `${line}\r\n`).join(''));
      replies.push(...(await Promise.all(commands.map(() => this.reply()))));
    } else {
      for (const [line, stage] of commands) {
        this.stage = stage;
        this.write(`${line}\r\n`);
        const reply = await this.reply();
        replies.push(reply);
        if (reply.code >= 400) break;
      }
    }
    commands.forEach(([, stage, what], i) => {
      const reply = replies[i];
      const expected = stage === 'DATA' ? 354 : 250;
      if (!refused && reply && Math.floor(reply.code / 100) !== Math.floor(expected / 100)) refused = replyError(what, reply, 'EENVELOPE', stage);
    });
    if (refused) {
      // A relay that said 354 after refusing the recipient waits for content: an empty message ends it.
      if (replies[commands.length - 1]?.code === 354) {
        this.write('.\r\n');
        await this.reply().catch(() => undefined);
      }
      await this.reset().catch(() => undefined); // a failed RSET has failed the session: the pool drops it
      throw refused;
    }
    this.stage = 'DATA';
    if (!this.failure) {
      this.socket.cork();
      for (const part of dataPayload(raw)) this.socket.write(part);
      // Uncorked on the next tick, so a next transaction's commands begun now go in the same write.
      process.nextTick(() => this.socket.uncork());
    }
    // Queued before `contentWritten` lets another transaction queue its own.
    const final = this.reply();
    contentWritten?.();
    const reply = await final;
    if (reply.code < 200 || reply.code >= 300) throw replyError('Message failed', reply, 'EMESSAGE', 'DATA');
    return reply.text;
  }

  /**
   * QUIT when the connection is idle and healthy (after the replies still to come, if any: a
   * pipelined transaction is not cut off); the socket closes either way.
   */
  close(): void {
    if (this.failure === undefined && this.waiting.length > 0) {
      this.closing = true;
      return;
    }
    const polite = this.failure === undefined;
    this.fail(new SmtpError('The connection was closed by this client', undefined, false, 'ECONNECTION', this.stage), !polite);
    if (polite) this.socket.end('QUIT\r\n');
  }

  private async handshake(): Promise<void> {
    const greeting = await this.reply();
    if (greeting.code !== 220) throw replyError('Relay refused the connection', greeting, 'EPROTOCOL', 'CONN');
    await this.hello();
    if (!this.opts.secure && this.opts.startTls !== 'never' && this.extensions.has('STARTTLS')) {
      await this.command('STARTTLS', 220, 'ETLS', 'CONN');
      await this.upgrade();
      await this.hello();
    } else if (!this.opts.secure && this.opts.startTls === 'required') {
      throw new SmtpError('STARTTLS is required (SMTP_URL requireTLS) but the relay does not offer it', undefined, false, 'ETLS', 'CONN');
    }
    if (this.opts.auth) await this.login(this.opts.auth);
  }

  private async hello(): Promise<void> {
    this.write(`EHLO ${this.opts.clientName}\r\n`);
    const reply = await this.reply();
    if (reply.code >= 500) {
      this.extensions = new Set();
      await this.command(`HELO ${this.opts.clientName}`, 250, 'EPROTOCOL', 'CONN');
      return;
    }
    if (reply.code !== 250) throw replyError('EHLO failed', reply, 'EPROTOCOL', 'CONN');
    // Each line after the first names an extension: "250-PIPELINING", "250 SIZE 10240000", "250-AUTH PLAIN LOGIN".
    this.extensions = new Set();
    for (const line of reply.text.split('\n').slice(1)) {
      const words = line.slice(4).trim().toUpperCase().split(/\s+/);
      this.extensions.add(words[0]!);
      if (words[0] === 'AUTH') for (const mechanism of words.slice(1)) this.extensions.add(`AUTH=${mechanism}`);
    }
  }

  private async login(auth: { user: string; pass: string }): Promise<void> {
    if (this.extensions.has('AUTH=LOGIN') && !this.extensions.has('AUTH=PLAIN')) {
      this.stage = 'AUTH LOGIN';
      await this.command('AUTH LOGIN', 334, 'EAUTH', 'AUTH LOGIN');
      await this.command(Buffer.from(auth.user).toString('base64'), 334, 'EAUTH', 'AUTH LOGIN');
      await this.command(Buffer.from(auth.pass).toString('base64'), 235, 'EAUTH', 'AUTH LOGIN', 'Invalid login');
      return;
    }
    const token = Buffer.from(`\u0000${auth.user}\u0000${auth.pass}`).toString('base64');
    this.stage = 'AUTH PLAIN';
    await this.command(`AUTH PLAIN ${token}`, 235, 'EAUTH', 'AUTH PLAIN', 'Invalid login');
  }

  /** Ends a refused transaction so the connection can carry the next one. */
  private async reset(): Promise<void> {
    this.stage = 'RSET';
    this.write('RSET\r\n');
    const reply = await this.reply();
    if (reply.code !== 250) this.fail(replyError('RSET failed', reply, 'EPROTOCOL', 'RSET'));
  }

  private async command(line: string, expected: number, code: string, stage: string, what = `${stage} failed`): Promise<Reply> {
    this.write(`${line}\r\n`);
    const reply = await this.reply();
    if (reply.code !== expected) throw replyError(what, reply, code, stage);
    return reply;
  }

  private async upgrade(): Promise<void> {
    const plain = this.socket;
    this.detach(plain);
    const secured = tls.connect({ socket: plain, ...this.tlsOptions() });
    this.attach(secured);
    this.stage = 'STARTTLS';
    await Promise.race([new Promise((resolve) => secured.once('secureConnect', resolve)), this.broken]);
    this.stage = 'CONN';
  }

  private tlsOptions(): tls.ConnectionOptions {
    const servername = this.opts.tls.servername ?? (net.isIP(this.opts.host) ? undefined : this.opts.host);
    return { rejectUnauthorized: this.opts.tls.rejectUnauthorized, ...(servername ? { servername } : {}) };
  }

  private write(data: string): void {
    if (this.failure) return; // the pending reply() rejects with the failure
    this.socket.write(data);
  }

  private reply(): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private readonly onData = (chunk: Buffer) => {
    if (this.failure) return;
    this.received += chunk.toString('latin1');
    for (let end = this.received.indexOf('\n'); end !== -1; end = this.received.indexOf('\n')) {
      const line = Buffer.from(this.received.slice(0, end).replace(/\r$/, ''), 'latin1').toString('utf8');
      this.received = this.received.slice(end + 1);
      if (!/^\d{3}(?:[ -]|$)/.test(line)) {
        this.fail(new SmtpError(`Invalid reply from the relay: ${JSON.stringify(line.slice(0, 200))}`, undefined, false, 'EPROTOCOL', this.stage));
        return;
      }
      this.lines.push(line);
      if (line[3] === '-') continue;
      const reply = { code: Number(line.slice(0, 3)), text: this.lines.join('\n') };
      this.lines = [];
      const waiter = this.waiting.shift();
      if (reply.code === 421) {
        // The relay is closing the channel (RFC 5321 3.8); whatever was asked gets this answer.
        const err = replyError('The relay closed the connection', reply, 'ECONNECTION', this.stage);
        waiter?.reject(err);
        this.fail(err);
        return;
      }
      if (waiter) {
        waiter.resolve(reply);
        if (this.closing && this.waiting.length === 0) {
          this.close();
          return;
        }
      } else {
        this.fail(new SmtpError(`Unexpected reply from the relay: ${reply.text}`, reply.code, false, 'EPROTOCOL', this.stage));
        return;
      }
    }
  };

  private readonly onError = (err: Error) => {
    const tlsHandshake = this.stage === 'STARTTLS';
    this.fail(new SmtpError(err.message, undefined, false, tlsHandshake ? 'ETLS' : 'ESOCKET', tlsHandshake ? 'CONN' : this.stage));
  };

  private readonly onClose = () => {
    this.fail(new SmtpError('Connection closed unexpectedly', undefined, false, 'ECONNECTION', this.stage === 'STARTTLS' ? 'CONN' : this.stage));
  };

  private readonly onTimeout = () => {
    this.fail(new SmtpError(`Timeout: no reply in ${this.opts.socketTimeoutMs} ms`, undefined, false, 'ETIMEDOUT', this.stage));
  };

  private attach(socket: net.Socket): void {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setTimeout(this.opts.socketTimeoutMs);
    socket.on('data', this.onData).on('error', this.onError).on('close', this.onClose).on('timeout', this.onTimeout);
  }

  private detach(socket: net.Socket): void {
    socket.off('data', this.onData).off('error', this.onError).off('close', this.onClose).off('timeout', this.onTimeout);
    socket.setTimeout(0);
  }

  /** The first failure sticks: every pending and later reply() rejects with it. */
  private fail(err: SmtpError, destroy = true): void {
    if (this.failure) return;
    this.failure = err;
    this.rejectBroken(err);
    for (const waiter of this.waiting.splice(0)) waiter.reject(err);
    if (destroy) this.socket.destroy();
    this.onGone?.();
  }
}
