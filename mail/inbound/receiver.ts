import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';

/**
 * What the receiver asks of the service: whether an address is ours (asked at RCPT, so a message
 * for anyone else is refused before its content is sent: never an open relay), then what to do with
 * a whole message for the addresses it accepted.
 */
export interface InboundHandler<R> {
  /** The recipient as the service knows it, or undefined to refuse the address (550). Throwing refuses it for now (451). */
  recipient(address: string): Promise<R | undefined>;
  /** Throwing answers 451, and the sending MTA tries again later. */
  deliver(message: { raw: Buffer; mailFrom: string; recipients: R[] }): Promise<void>;
}

export interface ReceiverOptions {
  port: number;
  /** Address to listen on; undefined: every interface. */
  host?: string;
  /** The name in the greeting: the host the MX records point at. */
  name: string;
  /** Offered with STARTTLS when given. */
  tls?: { key: string; cert: string };
  maxMessageBytes: number;
  onError?: (err: Error) => void;
}

export interface Receiver {
  port: number;
  close(): Promise<void>;
}

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code });

/** The SMTP receiver (npm `smtp-server`): no AUTH, no relaying, every message within the size cap. */
export function startReceiver<R>(opts: ReceiverOptions, handler: InboundHandler<R>): Promise<Receiver> {
  // What RCPT resolved each accepted address to; smtp-server keeps the same object in the envelope.
  const resolved = new WeakMap<SMTPServerAddress, R>();
  const server = new SMTPServer({
    name: opts.name,
    banner: 'ESMTP',
    logger: false,
    authOptional: true,
    disabledCommands: opts.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(opts.tls ? { key: opts.tls.key, cert: opts.tls.cert } : {}),
    size: opts.maxMessageBytes,
    onRcptTo(address, _session, callback) {
      handler.recipient(address.address).then(
        (recipient) => {
          if (recipient === undefined) return callback(smtpError(550, `5.1.1 <${address.address}>: recipient not accepted here`));
          resolved.set(address, recipient);
          callback();
        },
        (err: Error) => {
          opts.onError?.(err);
          callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
        },
      );
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        // Past the cap nothing more is kept; smtp-server reads on and flags the stream.
        if (size <= opts.maxMessageBytes) chunks.push(chunk);
      });
      stream.on('end', () => {
        if (stream.sizeExceeded || size > opts.maxMessageBytes) {
          return callback(smtpError(552, `5.3.4 Message too big: at most ${opts.maxMessageBytes} bytes`));
        }
        const recipients = session.envelope.rcptTo.flatMap((a) => (resolved.has(a) ? [resolved.get(a)!] : []));
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        handler.deliver({ raw: Buffer.concat(chunks), mailFrom, recipients }).then(
          () => callback(),
          (err: Error) => {
            opts.onError?.(err);
            callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
          },
        );
      });
    },
  });
  server.on('error', (err) => opts.onError?.(err));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve({
        port: (server.server.address() as AddressInfo).port,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}
