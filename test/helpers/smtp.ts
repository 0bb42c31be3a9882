import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { waitUntil } from './wait';

/**
 * A real SMTP server (npm `smtp-server`) on 127.0.0.1 that accepts any mail and keeps it, for
 * tests that send over SMTP and assert on what arrived. Plain SMTP only: STARTTLS is disabled.
 * AUTH is offered but optional and any credentials are accepted (so clients configured with or
 * without a user both work), unless `credentials` asks for specific ones.
 *
 *   const smtp = await startSmtpSink();
 *   // SMTP_URL = smtp.url
 *   smtp.failNext(451);                 // next message gets "451 ..." after DATA, then back to normal
 *   await smtp.waitFor(1);
 *   smtp.messages[0].raw                // exactly the bytes of the message (dot-unstuffed)
 *   await smtp.stop(); await smtp.restart();   // refuse connections for a while, same port after
 *   await smtp.close();
 */

export interface SmtpMessage {
  envelope: { from: string; to: string[] };
  raw: Buffer;
  /** The AUTH user of the session, when the client authenticated. */
  user: string | undefined;
  receivedAt: Date;
}

/** Where an injected failure answers: greeting, MAIL FROM, each RCPT TO, or the end of DATA. */
export type SmtpStage = 'connect' | 'mail' | 'rcpt' | 'data';

export interface SmtpSinkOptions {
  /** Fixed port; default 0 (any free port, kept across stop()/restart()). */
  port?: number;
  /** Require AUTH with exactly these credentials (535 otherwise). */
  credentials?: { user: string; pass: string };
  /** Advertised SIZE limit in bytes; bigger messages get 552. */
  size?: number;
}

export interface SmtpSink {
  readonly host: string;
  readonly port: number;
  /** smtp://127.0.0.1:<port> */
  readonly url: string;
  /** Accepted messages in arrival order (the same array throughout; clear() empties it). */
  readonly messages: SmtpMessage[];
  /** Whether the server currently accepts connections (false between stop() and restart()). */
  readonly running: boolean;
  /** Resolves with the messages once at least `count` have arrived; rejects after timeoutMs. */
  waitFor(count: number, timeoutMs?: number): Promise<SmtpMessage[]>;
  /**
   * The next `n` transactions get `code` (e.g. 421/451 transient, 550/554 permanent) at `stage`
   * (default 'data', after the whole message was sent); for 'rcpt' each RCPT TO counts, for
   * 'connect' each connection.
   */
  failNext(code: number, n?: number, opts?: { stage?: SmtpStage; message?: string }): void;
  /** Every RCPT TO matching `match` gets `code` (default 550) until clearFailures(). */
  failRecipient(match: string | RegExp, code?: number, message?: string): void;
  clearFailures(): void;
  /** Forgets the messages received so far. */
  clear(): void;
  /**
   * Milliseconds between taking a message (it is in `messages`) and answering 250: a client that
   * dies meanwhile never hears that its message was accepted (SMTP's own duplicate window).
   */
  acceptDelayMs: number;
  /** Stops listening and drops open connections: clients get "connection refused" until restart(). */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

interface PendingFailure {
  stage: SmtpStage;
  code: number;
  message: string | undefined;
  remaining: number;
}

const smtpError = (code: number, message?: string) =>
  Object.assign(new Error(message ?? (code >= 500 ? 'Permanent failure (test sink)' : 'Temporary failure, try again later (test sink)')), {
    responseCode: code,
  });

export async function startSmtpSink(opts: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const host = '127.0.0.1';
  const messages: SmtpMessage[] = [];
  const waiters = new Set<() => void>();
  let failures: PendingFailure[] = [];
  let recipientFailures: { match: string | RegExp; code: number; message: string | undefined }[] = [];

  /** Consumes one pending failure for this stage, if any. */
  const takeFailure = (stage: SmtpStage): Error | undefined => {
    const f = failures.find((x) => x.stage === stage && x.remaining > 0);
    if (!f) return undefined;
    f.remaining -= 1;
    failures = failures.filter((x) => x.remaining > 0);
    return smtpError(f.code, f.message);
  };

  const options: SMTPServerOptions = {
    logger: false,
    disabledCommands: ['STARTTLS'],
    authOptional: !opts.credentials,
    allowInsecureAuth: true,
    disableReverseLookup: true,
    // stop()/close() drop lingering (pooled) connections after this instead of the default 30 s.
    closeTimeout: 200,
    ...(opts.size ? { size: opts.size } : {}),
    onAuth(auth, _session, callback) {
      if (opts.credentials && (auth.username !== opts.credentials.user || auth.password !== opts.credentials.pass)) {
        return callback(smtpError(535, 'Authentication credentials invalid'));
      }
      callback(null, { user: auth.username });
    },
    onConnect(_session, callback) {
      callback(takeFailure('connect'));
    },
    onMailFrom(_address, _session, callback) {
      callback(takeFailure('mail'));
    },
    onRcptTo(address, _session, callback) {
      const rule = recipientFailures.find((r) =>
        typeof r.match === 'string' ? r.match.toLowerCase() === address.address.toLowerCase() : r.match.test(address.address),
      );
      if (rule) return callback(smtpError(rule.code, rule.message ?? `Mailbox ${address.address} unavailable (test sink)`));
      callback(takeFailure('rcpt'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (err) => callback(err));
      // The whole message is read before answering, as a real server does.
      stream.on('end', () => {
        if (stream.sizeExceeded) return callback(smtpError(552, 'Message exceeds the size limit'));
        const failure = takeFailure('data');
        if (failure) return callback(failure);
        const envelope = session.envelope;
        messages.push({
          envelope: {
            from: envelope.mailFrom ? envelope.mailFrom.address : '',
            to: envelope.rcptTo.map((r) => r.address),
          },
          raw: Buffer.concat(chunks),
          user: typeof session.user === 'string' ? session.user : undefined,
          receivedAt: new Date(),
        });
        for (const wake of [...waiters]) wake();
        if (sink.acceptDelayMs > 0) setTimeout(() => callback(null, 'Queued (test sink)'), sink.acceptDelayMs);
        else callback(null, 'Queued (test sink)');
      });
    },
  };

  let server: SMTPServer | undefined;
  let port = opts.port ?? 0;

  const listen = async () => {
    const s = new SMTPServer(options);
    s.on('error', () => undefined); // connection-level errors (client resets) are not test failures
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      s.server.once('error', onError);
      s.listen(port, host, () => {
        s.server.off('error', onError);
        resolve();
      });
    });
    port = (s.server.address() as AddressInfo).port;
    server = s;
  };

  const shutdown = async () => {
    const s = server;
    server = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();

  const sink: SmtpSink = {
    acceptDelayMs: 0,
    host,
    get port() {
      return port;
    },
    get url() {
      return `smtp://${host}:${port}`;
    },
    messages,
    get running() {
      return server !== undefined;
    },
    waitFor(count, timeoutMs = 10_000) {
      if (messages.length >= count) return Promise.resolve(messages.slice());
      return new Promise((resolve, reject) => {
        const wake = () => {
          if (messages.length < count) return;
          waiters.delete(wake);
          clearTimeout(timer);
          resolve(messages.slice());
        };
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`SMTP sink: expected ${count} message(s) within ${timeoutMs} ms, got ${messages.length}`));
        }, timeoutMs);
        waiters.add(wake);
      });
    },
    failNext(code, n = 1, failOpts = {}) {
      if (!(code >= 400 && code <= 599)) throw new Error(`failNext: ${code} is not a 4xx/5xx SMTP reply code`);
      failures.push({ stage: failOpts.stage ?? 'data', code, message: failOpts.message, remaining: n });
    },
    failRecipient(match, code = 550, message) {
      recipientFailures.push({ match, code, message });
    },
    clearFailures() {
      failures = [];
      recipientFailures = [];
    },
    clear() {
      messages.length = 0;
    },
    stop: shutdown,
    async restart() {
      if (server) return;
      // The port was ours a moment ago; retry briefly in case the kernel is slow to release it.
      let inUse: Error | undefined;
      const listening = () =>
        listen().then(
          () => true,
          (err: NodeJS.ErrnoException) => {
            inUse = err.code === 'EADDRINUSE' ? err : undefined;
            if (!inUse) throw err;
            return false;
          },
        );
      await waitUntil(listening, 2_000).catch((err: Error) => {
        throw inUse ?? err;
      });
    },
    close: shutdown,
  };
  return sink;
}
