import net from 'node:net';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { loadConfig } from '../../config';
import { relayUnreachable, SmtpError } from '../../mail/smtp-errors';
import { SmtpPool, type SmtpPoolOptions, smtpOptionsFromUrl } from '../../mail/smtp-pool';
import { dataPayload } from '../../mail/smtp-session';
import { waitUntil } from '../helpers/wait';

/**
 * mail/smtp-pool.ts against real SMTP servers on loopback (npm smtp-server, which also brings a
 * self-signed certificate for its TLS), and against a scripted one for what no well-behaved relay
 * does: dropping the connection after the content, or never answering.
 */

interface Received {
  from: string;
  to: string[];
  raw: Buffer;
  secure: boolean;
  user: unknown;
}

interface Relay {
  url: string;
  port: number;
  received: Received[];
  /** Connections opened so far, and the most open at once. */
  connections: { total: number; open: number; peak: number };
  close(): Promise<void>;
}

const relays: Relay[] = [];
const pools: SmtpPool[] = [];
afterEach(async () => {
  for (const pool of pools.splice(0)) pool.close();
  await Promise.all(relays.splice(0).map((r) => r.close()));
});

async function relay(options: Partial<SMTPServerOptions> = {}, scheme = 'smtp'): Promise<Relay> {
  const received: Received[] = [];
  const connections = { total: 0, open: 0, peak: 0 };
  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ['STARTTLS'], // the TLS tests turn it on
    closeTimeout: 100,
    onConnect(_session, callback) {
      connections.total++;
      connections.peak = Math.max(connections.peak, ++connections.open);
      callback();
    },
    onClose() {
      connections.open--;
    },
    onData(stream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          user: session.user,
        });
        callback(null, `Queued as ${received.length}`);
      });
    },
    ...options,
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as net.AddressInfo).port;
  const r: Relay = {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    received,
    connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  relays.push(r);
  return r;
}

type Act = 'answer' | 'drop' | 'silent';

/**
 * A relay that answers each command of the n-th transaction of a connection as `act` says:
 * at MAIL FROM and after the content, it answers, drops the connection, or never answers.
 * `received` counts contents that arrived whole, whatever came of them.
 */
async function scripted(act: (stage: 'mail' | 'content', transaction: number) => Act): Promise<Relay> {
  const sockets = new Set<net.Socket>();
  const r: Relay = { url: '', port: 0, received: [], connections: { total: 0, open: 0, peak: 0 }, close: async () => undefined };
  const server = net.createServer((socket) => {
    sockets.add(socket);
    r.connections.total++;
    socket.on('error', () => undefined);
    socket.write('220 scripted\r\n');
    let transaction = 0;
    let inData = false;
    let buffered = '';
    const perform = (what: Act, answer: string) => {
      if (what === 'answer') socket.write(answer);
      else if (what === 'drop') socket.destroy();
    };
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (let end = buffered.indexOf('\r\n'); end !== -1; end = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (inData) {
          if (line !== '.') continue;
          inData = false;
          r.received.push({ from: '', to: [], raw: Buffer.alloc(0), secure: false, user: undefined });
          perform(act('content', transaction), '250 ok\r\n');
          continue;
        }
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-scripted\r\n250 PIPELINING\r\n');
        else if (verb === 'MAIL') perform(act('mail', ++transaction), '250 ok\r\n');
        else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go ahead\r\n');
        } else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.port = (server.address() as net.AddressInfo).port;
  r.url = `smtp://127.0.0.1:${r.port}`;
  r.close = () => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  relays.push(r);
  return r;
}

function pool(url: string, over: Partial<SmtpPoolOptions> = {}): SmtpPool {
  const p = new SmtpPool({ ...smtpOptionsFromUrl(url), ...over });
  pools.push(p);
  return p;
}

const message = (i: number, body = `<p>message ${i}</p>`) =>
  Buffer.from(`From: a@example.com\r\nTo: r${i}@example.org\r\nSubject: ${i}\r\nMessage-ID: <${i}@example.com>\r\n\r\n${body}\r\n`);

const failureOf = (work: Promise<unknown>) =>
  work.then(
    () => {
      throw new Error('the send was accepted');
    },
    (err: unknown) => {
      expect(err).toBeInstanceOf(SmtpError);
      return err as SmtpError;
    },
  );

describe('the content after DATA', () => {
  test('dot-stuffed, ends in CRLF then the lone dot', () => {
    const payload = (raw: string) => Buffer.concat(dataPayload(Buffer.from(raw))).toString('latin1');
    expect(payload('a\r\nb\r\n')).toBe('a\r\nb\r\n.\r\n');
    expect(payload('a\r\nb')).toBe('a\r\nb\r\n.\r\n');
    expect(payload('.lead\r\nx\r\n.\r\n..two\r\n')).toBe('..lead\r\nx\r\n..\r\n...two\r\n.\r\n');
  });

  test('arrives byte for byte, dots included, with and without PIPELINING', async () => {
    for (const options of [{}, { hidePIPELINING: true }]) {
      const r = await relay(options);
      const p = pool(r.url);
      const body = '.starts with a dot\r\n.\r\nmiddle\r\n..two dots\r\nlast line without CRLF';
      const raw = message(1, body);
      const response = await p.send('a@example.com', ['r1@example.org'], raw);
      expect(response).toMatch(/^250 .*Queued as 1/);
      expect(r.received).toHaveLength(1);
      expect(r.received[0]!.raw.toString('latin1')).toBe(`${raw.toString('latin1')}`);
      expect(r.received[0]!).toMatchObject({ from: 'a@example.com', to: ['r1@example.org'] });
    }
  });
});

describe('the pool', () => {
  test('keeps to maxConnections, reuses connections, replaces one after maxMessages', async () => {
    const r = await relay();
    const p = pool(r.url, { maxConnections: 3, maxMessages: 10 });
    await Promise.all(Array.from({ length: 60 }, (_, i) => p.send('a@example.com', [`r${i}@example.org`], message(i))));
    expect(r.received.map((m) => m.to[0]).sort()).toEqual(Array.from({ length: 60 }, (_, i) => `r${i}@example.org`).sort());
    expect(r.connections.peak).toBeLessThanOrEqual(3);
    expect(r.connections.total).toBeGreaterThanOrEqual(6); // 60 messages, at most 10 each
    expect(r.connections.total).toBeLessThanOrEqual(9);
  });

  test('a refused recipient fails its message only; the connection carries the next one', async () => {
    const r = await relay({
      onRcptTo(address, _session, callback) {
        if (address.address.startsWith('bad')) return callback(Object.assign(new Error('No such user'), { responseCode: 550 }));
        callback();
      },
    });
    const p = pool(r.url, { maxConnections: 1 });
    const refused = await failureOf(p.send('a@example.com', ['bad@example.org'], message(1)));
    expect(refused).toMatchObject({ responseCode: 550, permanent: true, code: 'EENVELOPE', command: 'RCPT TO' });
    expect(refused.message).toContain('No such user');
    expect(relayUnreachable(refused)).toBe(false);
    await p.send('a@example.com', ['good@example.org'], message(2));
    expect(r.received.map((m) => m.to)).toEqual([['good@example.org']]);
    expect(r.connections.total).toBe(1);
  });

  test('a connection the relay dropped while idle is replaced without failing the send', async () => {
    const r = await relay({ socketTimeout: 300 });
    const p = pool(r.url, { maxConnections: 1 });
    await p.send('a@example.com', ['r1@example.org'], message(1));
    // The relay times the idle connection out (its socketTimeout) and closes it.
    await waitUntil(() => r.connections.total === 1 && r.connections.open === 0, { timeoutMs: 5_000, intervalMs: 20, what: 'the relay closing the idle connection' });
    await p.send('a@example.com', ['r2@example.org'], message(2));
    expect(r.received).toHaveLength(2);
    expect(r.connections.total).toBe(2);
  });

  test('closed: sends fail as unreachable, without a connection', async () => {
    const r = await relay();
    const p = pool(r.url);
    p.close();
    const err = await failureOf(p.send('a@example.com', ['r@example.org'], message(1)));
    expect(relayUnreachable(err)).toBe(true);
    expect(r.connections.total).toBe(0);
  });
});

describe('a kept connection that fails', () => {
  test('before the content: the message goes again on a new connection', async () => {
    // The relay drops every connection at its second MAIL FROM, as one that went away while the connection sat idle.
    const r = await scripted((stage, n) => (stage === 'mail' && n === 2 ? 'drop' : 'answer'));
    const p = pool(r.url, { maxConnections: 1 });
    await p.send('a@example.com', ['r1@example.org'], message(1));
    await p.send('a@example.com', ['r2@example.org'], message(2));
    expect(r.received).toHaveLength(2);
    expect(r.connections.total).toBe(2);
  });

  test('after the content, dropped before the reply: a connection error, not sent again', async () => {
    const r = await scripted((stage, n) => (stage === 'content' && n === 2 ? 'drop' : 'answer'));
    const p = pool(r.url, { maxConnections: 1 });
    await p.send('a@example.com', ['r1@example.org'], message(1));
    const err = await failureOf(p.send('a@example.com', ['r2@example.org'], message(2)));
    expect(err).toMatchObject({ responseCode: undefined, code: 'ECONNECTION', command: 'DATA' });
    expect(r.received).toHaveLength(2);
    expect(r.connections.total).toBe(1);
  });

  test('after the content, no reply: a timeout after socketTimeout, not sent again', async () => {
    const r = await scripted((stage) => (stage === 'content' ? 'silent' : 'answer'));
    const p = pool(`${r.url}?socketTimeout=300`);
    const started = Date.now();
    const err = await failureOf(p.send('a@example.com', ['r@example.org'], message(1)));
    expect(err).toMatchObject({ responseCode: undefined, code: 'ETIMEDOUT', command: 'DATA' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(r.connections.total).toBe(1);
  });
});

describe('pipelining across messages', () => {
  test("the next message's commands follow a content before the relay answered it", async () => {
    const seen: string[] = [];
    // The first content is never answered: only pipelining gets the second MAIL FROM to the relay.
    const r = await scripted((stage, n) => {
      seen.push(`${stage} ${n}`);
      return stage === 'content' && n === 1 ? 'silent' : 'answer';
    });
    const p = pool(r.url, { maxConnections: 1 });
    // What the sends resolve to is beside the point: this relay answers out of turn.
    const sends = [1, 2].map((i) => p.send('a@example.com', [`r${i}@example.org`], message(i)).catch(() => undefined));
    await waitUntil(() => seen.includes('mail 2'), { timeoutMs: 2_000, intervalMs: 20 }).catch(() => undefined);
    expect(seen.slice(0, 3)).toEqual(['mail 1', 'content 1', 'mail 2']);
    await r.close();
    await Promise.all(sends);
  });

  test("a refused content fails its message only; the messages pipelined behind it are delivered", async () => {
    let n = 0;
    const r = await relay({
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          if (++n === 1) return callback(Object.assign(new Error('Content rejected'), { responseCode: 554 }));
          r.received.push({ from: '', to: session.envelope.rcptTo.map((x) => x.address), raw: Buffer.concat(chunks), secure: false, user: undefined });
          callback(null, 'ok');
        });
      },
    });
    const p = pool(r.url, { maxConnections: 1 });
    const sends = [1, 2, 3].map((i) => p.send('a@example.com', [`r${i}@example.org`], message(i)));
    const refused = await failureOf(sends[0]!);
    expect(refused).toMatchObject({ responseCode: 554, permanent: true, code: 'EMESSAGE', command: 'DATA' });
    await Promise.all(sends.slice(1));
    expect(r.received.map((m) => m.to[0])).toEqual(['r2@example.org', 'r3@example.org']);
    expect(r.connections.total).toBe(1);
  });

  test('a connection dropped after a content: that message is not sent again, the one pipelined behind it goes on a new connection', async () => {
    let contents = 0;
    const r = await scripted((stage) => (stage === 'content' && ++contents === 1 ? 'drop' : 'answer'));
    const p = pool(r.url, { maxConnections: 1 });
    const [first, second] = await Promise.allSettled([
      p.send('a@example.com', ['r1@example.org'], message(1)),
      p.send('a@example.com', ['r2@example.org'], message(2)),
    ]);
    expect(first).toMatchObject({ status: 'rejected', reason: { responseCode: undefined, code: 'ECONNECTION' } });
    expect(second).toMatchObject({ status: 'fulfilled' });
    expect(r.received).toHaveLength(2);
    expect(r.connections.total).toBe(2);
  });
});

describe('TLS and AUTH', () => {
  test('STARTTLS when the relay offers it; the relay’s certificate is checked', async () => {
    const r = await relay({ disabledCommands: [] });
    const checked = await failureOf(pool(r.url).send('a@example.com', ['r@example.org'], message(1)));
    // smtp-server's built-in certificate is self-signed (and expired): refused, as a failure of the session.
    expect(checked).toMatchObject({ code: 'ETLS', command: 'CONN' });
    expect(relayUnreachable(checked)).toBe(true);
    await pool(`${r.url}?tls.rejectUnauthorized=false`).send('a@example.com', ['r@example.org'], message(2));
    expect(r.received.map((m) => m.secure)).toEqual([true]);
  });

  test('smtps:// is TLS from the first byte', async () => {
    const r = await relay({ secure: true }, 'smtps');
    await pool(`${r.url}?tls.rejectUnauthorized=false`).send('a@example.com', ['r@example.org'], message(1));
    expect(r.received.map((m) => m.secure)).toEqual([true]);
  });

  test('requireTLS fails against a relay without STARTTLS; ignoreTLS stays plain where it is offered', async () => {
    const plain = await relay();
    const err = await failureOf(pool(`${plain.url}?requireTLS=true`).send('a@example.com', ['r@example.org'], message(1)));
    expect(err).toMatchObject({ code: 'ETLS', command: 'CONN' });
    expect(relayUnreachable(err)).toBe(true);
    const offered = await relay({ disabledCommands: [] });
    await pool(`${offered.url}?ignoreTLS=true`).send('a@example.com', ['r@example.org'], message(2));
    expect(offered.received.map((m) => m.secure)).toEqual([false]);
  });

  test.each([['PLAIN'], ['LOGIN']])('AUTH %s with the URL’s credentials; a wrong password is refused for good', async (mechanism) => {
    const r = await relay({
      allowInsecureAuth: true,
      authOptional: false,
      authMethods: [mechanism],
      onAuth(auth, _session, callback) {
        if (auth.username === 'sender@example.com' && auth.password === 'p@ss:word/1') return callback(null, { user: auth.username });
        callback(Object.assign(new Error('Invalid credentials'), { responseCode: 535 }));
      },
    });
    const authed = `smtp://${encodeURIComponent('sender@example.com')}:${encodeURIComponent('p@ss:word/1')}@127.0.0.1:${r.port}`;
    await pool(authed).send('a@example.com', ['r@example.org'], message(1));
    expect(r.received.map((m) => m.user)).toEqual(['sender@example.com']);
    const wrong = await failureOf(pool(`smtp://sender%40example.com:nope@127.0.0.1:${r.port}`).send('a@example.com', ['r@example.org'], message(2)));
    expect(wrong).toMatchObject({ responseCode: 535, permanent: true, code: 'EAUTH' });
  });
});

describe('SMTP_URL', () => {
  test('defaults and parameters', () => {
    expect(smtpOptionsFromUrl('smtp://relay.example.com')).toMatchObject({ host: 'relay.example.com', port: 587, secure: false, startTls: 'offered', maxConnections: 10 });
    expect(smtpOptionsFromUrl('smtps://u%40x.com:p%2Fw@relay.example.com')).toMatchObject({ port: 465, secure: true, auth: { user: 'u@x.com', pass: 'p/w' } });
    expect(
      smtpOptionsFromUrl('smtp://relay.example.com:2525?pool=true&maxConnections=12&requireTLS=true&tls.rejectUnauthorized=false&name=mx.example.com'),
    ).toMatchObject({ port: 2525, maxConnections: 12, startTls: 'required', tls: { rejectUnauthorized: false }, clientName: 'mx.example.com' });
    expect(smtpOptionsFromUrl('smtp://[::1]:25')).toMatchObject({ host: '::1', port: 25 });
  });

  test.each([
    ['http://relay.example.com', /smtp:\/\/ or smtps:\/\//],
    ['smtp://relay.example.com?maxConnection=3', /unknown parameter maxConnection/],
    ['smtp://relay.example.com?secure=yes', /secure must be true or false/],
    ['smtp://relay.example.com?maxConnections=0', /maxConnections must be a positive whole number/],
    ['smtp://relay.example.com?requireTLS=true&ignoreTLS=true', /contradict/],
  ])('%s is refused at startup', (url, reason) => {
    expect(() => smtpOptionsFromUrl(url)).toThrow(reason);
    expect(() => loadConfig({ SMTP_URL: url })).toThrow(/Invalid configuration[\s\S]*SMTP_URL/);
  });
});
