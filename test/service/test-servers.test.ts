import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import nodemailer from 'nodemailer';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/** The SMTP sink and DNS server other tests rely on, exercised with real clients. */

describe('SMTP sink', () => {
  let smtp: SmtpSink;
  beforeEach(async () => {
    smtp = await startSmtpSink();
  });
  afterEach(() => smtp.close());

  const transport = (url = smtp.url) => nodemailer.createTransport(url);

  // CRLF line endings, a line starting with a dot (dot-stuffed on the wire), 8-bit UTF-8 text.
  const raw = Buffer.from(
    [
      'From: Ada <ada@example.com>',
      'To: bob@example.net',
      'Subject: =?UTF-8?Q?caf=C3=A9?=',
      'Message-ID: <m1@example.com>',
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: 8bit',
      '',
      'Hello Bob,',
      '.a line that starts with a dot',
      '..and one with two',
      'café ✓',
      '',
    ].join('\r\n'),
    'utf8',
  );

  test('listens on 127.0.0.1 with a smtp:// url', () => {
    expect(smtp.url).toBe(`smtp://127.0.0.1:${smtp.port}`);
    expect(smtp.port).toBeGreaterThan(0);
  });

  test('captures a message from nodemailer byte for byte, with its envelope', async () => {
    const info = await transport().sendMail({
      envelope: { from: 'bounces@example.com', to: ['bob@example.net', 'carol@example.org'] },
      raw,
    });
    expect(info.accepted).toEqual(['bob@example.net', 'carol@example.org']);
    const [message] = await smtp.waitFor(1);
    expect(message!.envelope).toEqual({ from: 'bounces@example.com', to: ['bob@example.net', 'carol@example.org'] });
    expect(message!.raw.equals(raw)).toBe(true);
    expect(message!.user).toBeUndefined();
  });

  test('a composed message arrives with its headers and body', async () => {
    await transport().sendMail({ from: 'ada@example.com', to: 'bob@example.net', subject: 'Hi', text: 'Hello there' });
    const [message] = await smtp.waitFor(1);
    const text = message!.raw.toString('utf8');
    expect(text).toMatch(/^Subject: Hi\r$/m);
    expect(text).toContain('Hello there');
  });

  test('accepts AUTH with any credentials when the client sends them', async () => {
    const url = `smtp://someone:secret@127.0.0.1:${smtp.port}`;
    await transport(url).sendMail({ envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw });
    const [message] = await smtp.waitFor(1);
    expect(message!.user).toBe('someone');
  });

  test('failNext(451) gives a transient error once, then mail is accepted', async () => {
    smtp.failNext(451);
    const t = transport();
    const mail = { envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw };
    const err = (await t.sendMail(mail).catch((e: unknown) => e)) as { responseCode?: number; response?: string };
    expect(err).toBeInstanceOf(Error);
    expect(err.responseCode).toBe(451);
    expect(err.response).toMatch(/^451 /);
    expect(smtp.messages).toHaveLength(0);

    await t.sendMail(mail);
    const [message] = await smtp.waitFor(1);
    expect(message!.raw.equals(raw)).toBe(true);
  });

  test('failures at other stages, per recipient, and permanent codes', async () => {
    const t = transport();
    smtp.failNext(550, 1, { stage: 'mail', message: 'Sender rejected' });
    const mailErr = (await t.sendMail({ envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw }).catch((e: unknown) => e)) as {
      responseCode?: number;
      response?: string;
    };
    expect(mailErr.responseCode).toBe(550);
    expect(mailErr.response).toContain('Sender rejected');

    smtp.failRecipient('gone@example.com', 550);
    const info = await t.sendMail({ envelope: { from: 'a@example.com', to: ['gone@example.com', 'ok@example.com'] }, raw });
    expect(info.rejected).toEqual(['gone@example.com']);
    expect(info.accepted).toEqual(['ok@example.com']);
    const [message] = await smtp.waitFor(1);
    expect(message!.envelope.to).toEqual(['ok@example.com']);

    smtp.failNext(421, 1, { stage: 'connect' });
    const connectErr = (await t.sendMail({ envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw }).catch((e: unknown) => e)) as {
      responseCode?: number;
    };
    expect(connectErr.responseCode).toBe(421);
    expect(smtp.messages).toHaveLength(1);
  });

  test('stop() refuses connections; restart() serves again on the same port', async () => {
    const { port } = smtp;
    await smtp.stop();
    expect(smtp.running).toBe(false);
    const refused = (await transport()
      .sendMail({ envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw })
      .catch((e: unknown) => e)) as NodeJS.ErrnoException;
    expect(refused.code).toBe('ESOCKET');
    expect(String(refused.message)).toContain('ECONNREFUSED');

    await smtp.restart();
    expect(smtp.port).toBe(port);
    await transport().sendMail({ envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw });
    await smtp.waitFor(1);
  });

  test('stop() also drops connections a pooled client keeps open', async () => {
    const pooled = nodemailer.createTransport({ host: '127.0.0.1', port: smtp.port, pool: true, maxConnections: 1 });
    try {
      await pooled.sendMail({ envelope: { from: 'a@example.com', to: ['b@example.com'] }, raw });
      const started = Date.now();
      await smtp.stop();
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      pooled.close();
    }
  });

  test('waitFor rejects with a count when too few arrive', async () => {
    await expect(smtp.waitFor(1, 100)).rejects.toThrow('expected 1 message(s) within 100 ms, got 0');
  });
});

describe('DNS server', () => {
  let dns: DnsServer;
  let resolver: Resolver;
  beforeEach(async () => {
    dns = await startDnsServer();
    // Generous: a busy machine may take a while to answer, and a UDP answer that truncates is asked again over TCP.
    resolver = new Resolver({ timeout: 5_000, tries: 1 });
    resolver.setServers([dns.address]);
  });
  afterEach(() => dns.close());

  test('listens on 127.0.0.1:<port>', () => {
    expect(dns.address).toBe(`127.0.0.1:${dns.port}`);
  });

  test('answers TXT, MX, A, AAAA and NS from the table', async () => {
    dns.set('example.com', 'TXT', ['v=spf1 include:_spf.example.net -all', ['part one ', 'part two']]);
    dns.set('example.com', 'MX', [
      { exchange: 'mx1.example.com', priority: 10 },
      { exchange: 'mx2.example.com', priority: 20 },
    ]);
    dns.set('example.com', 'NS', ['ns1.example.com']);
    dns.set('mx1.example.com', 'A', ['192.0.2.10', '192.0.2.11']);
    dns.set('mx1.example.com', 'AAAA', ['2001:db8::10']);

    expect(await resolver.resolveTxt('example.com')).toEqual([['v=spf1 include:_spf.example.net -all'], ['part one ', 'part two']]);
    // Node 24 adds `type: 'MX'` to each record; the table holds exchange and priority.
    const mx = (await resolver.resolveMx('example.com')).map(({ exchange, priority }) => ({ exchange, priority }));
    expect(mx.sort((a, b) => a.priority - b.priority)).toEqual([
      { exchange: 'mx1.example.com', priority: 10 },
      { exchange: 'mx2.example.com', priority: 20 },
    ]);
    expect(await resolver.resolveNs('example.com')).toEqual(['ns1.example.com']);
    expect((await resolver.resolve4('MX1.example.com.')).sort()).toEqual(['192.0.2.10', '192.0.2.11']);
    expect(await resolver.resolve6('mx1.example.com')).toEqual(['2001:db8::10']);
    expect(dns.queries.map((q) => q.type)).toEqual(['TXT', 'MX', 'NS', 'A', 'AAAA']);
  });

  test('unknown names are NXDOMAIN (ENOTFOUND); known names without that type are ENODATA', async () => {
    dns.set('example.com', 'A', ['192.0.2.1']);
    await expect(resolver.resolveTxt('nothing-here.example')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(resolver.resolveTxt('example.com')).rejects.toMatchObject({ code: 'ENODATA' });
  });

  test('changes show at once: set, remove, clear (TTL 0, nothing cached)', async () => {
    dns.set('_dmarc.example.com', 'TXT', ['v=DMARC1; p=none']);
    expect(await resolver.resolveTxt('_dmarc.example.com')).toEqual([['v=DMARC1; p=none']]);
    dns.set('_dmarc.example.com', 'TXT', ['v=DMARC1; p=reject']);
    expect(await resolver.resolveTxt('_dmarc.example.com')).toEqual([['v=DMARC1; p=reject']]);
    dns.remove('_dmarc.example.com', 'TXT');
    await expect(resolver.resolveTxt('_dmarc.example.com')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    dns.set('a.example.com', 'A', ['192.0.2.1']);
    dns.clear();
    await expect(resolver.resolve4('a.example.com')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  test('a DKIM-sized TXT record is split into 255-byte strings and comes back whole (over TCP when UDP truncates)', async () => {
    // Bigger than any UDP payload a resolver offers (512, or 1232 with EDNS).
    const key = `v=DKIM1; k=rsa; p=${'A'.repeat(2000)}`;
    dns.set('s1._domainkey.example.com', 'TXT', [key]);
    const [record] = await resolver.resolveTxt('s1._domainkey.example.com');
    expect(record!.every((chunk) => Buffer.byteLength(chunk) <= 255)).toBe(true);
    expect(record!.join('')).toBe(key);
    expect(dns.queries.map((q) => q.transport)).toEqual(['udp', 'tcp']);
  });

  test('CNAMEs inside the table are followed', async () => {
    dns.set('s1._domainkey.example.com', 'CNAME', ['s1.dkim.provider.example']);
    dns.set('s1.dkim.provider.example', 'TXT', ['v=DKIM1; p=abc']);
    expect(await resolver.resolveTxt('s1._domainkey.example.com')).toEqual([['v=DKIM1; p=abc']]);
    expect(await resolver.resolveCname('s1._domainkey.example.com')).toEqual(['s1.dkim.provider.example']);
  });

  test('delayMs beyond the resolver timeout gives ETIMEOUT; SERVFAIL on demand', async () => {
    dns.set('slow.example.com', 'TXT', ['late']);
    dns.delayMs = 1_000;
    const impatient = new Resolver({ timeout: 200, tries: 1 });
    impatient.setServers([dns.address]);
    await expect(impatient.resolveTxt('slow.example.com')).rejects.toMatchObject({ code: 'ETIMEOUT' });
    dns.delayMs = 0;
    expect(await resolver.resolveTxt('slow.example.com')).toEqual([['late']]);

    dns.setRcode('slow.example.com', 'SERVFAIL');
    await expect(resolver.resolveTxt('slow.example.com')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    dns.setRcode('slow.example.com', null);
    expect(await resolver.resolveTxt('slow.example.com')).toEqual([['late']]);
  });

  test('also answers over TCP on the same port', async () => {
    dns.set('example.com', 'A', ['192.0.2.7']);
    const query = Buffer.from([
      // header: id 0x1234, RD, one question
      0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      // example.com A IN
      7, ...Buffer.from('example'), 3, ...Buffer.from('com'), 0, 0x00, 0x01, 0x00, 0x01,
    ]);
    const reply = await new Promise<Buffer>((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port: dns.port });
      const chunks: Buffer[] = [];
      socket.on('data', (c) => {
        chunks.push(c);
        const all = Buffer.concat(chunks);
        if (all.length >= 2 && all.length >= 2 + all.readUInt16BE(0)) {
          socket.destroy();
          resolve(all.subarray(2, 2 + all.readUInt16BE(0)));
        }
      });
      socket.on('error', reject);
      const len = Buffer.alloc(2);
      len.writeUInt16BE(query.length);
      socket.write(Buffer.concat([len, query]));
    });
    expect(reply.readUInt16BE(0)).toBe(0x1234);
    expect(reply.readUInt16BE(6)).toBe(1); // one answer
    expect([...reply.subarray(reply.length - 4)]).toEqual([192, 0, 2, 7]);
    expect(dns.queries.at(-1)).toMatchObject({ name: 'example.com', type: 'A', transport: 'tcp' });
  });
});
