import { generateKeyPairSync } from 'node:crypto';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { type ParsedMail, simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { type OutgoingMessage, renderMessage } from '../../mail/compose';
import { htmlOnlyMessage } from '../../mail/mime';
import { createSmtpMailer, type Mailer } from '../../mail/transport';
import { relayUnreachable, SmtpError } from '../../mail/smtp-errors';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/**
 * The message the mailer sends (mail/mime.ts for HTML-only mail, MailComposer otherwise, signed
 * by mail/dkim-sign.ts) reads, once it arrived at a real SMTP server, as nodemailer's own
 * sendMail (MailComposer + its DKIM signer) had it read, and its signature verifies. Errors of
 * the relay keep nodemailer's code and command, which tell an unreachable relay from a refused message.
 */

const DOMAIN = 'mime-test.example';
const SELECTOR = 'sel1';
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const dkim = { domainName: DOMAIN, keySelector: SELECTOR, privateKey };
const record = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
const resolver = async (name: string, type: string) => {
  if (type === 'TXT' && name === `${SELECTOR}._domainkey.${DOMAIN}`) return [[record]];
  throw Object.assign(new Error(`no ${type} record for ${name}`), { code: 'ENOTFOUND' });
};

let sink: SmtpSink;
let mailer: Mailer;
let reference: ReturnType<typeof nodemailer.createTransport>;

beforeAll(async () => {
  sink = await startSmtpSink();
  mailer = createSmtpMailer(sink.url);
  reference = nodemailer.createTransport({ host: sink.host, port: sink.port, secure: false, ignoreTLS: true });
});

afterAll(async () => {
  mailer?.close();
  reference?.close();
  await sink?.close();
});

let seq = 0;
const base = (over: Partial<OutgoingMessage>): OutgoingMessage => ({
  messageId: `<m${++seq}-${Date.now()}@${DOMAIN}>`,
  from: { name: 'Tidings News', address: `news@${DOMAIN}` },
  to: { name: 'Ada Lovelace', address: 'ada@example.org' },
  subject: 'Hello',
  html: '<p>Hello</p>',
  headers: {},
  attachments: [],
  dkim,
  ...over,
});

const longLine = `<p>${'word '.repeat(60)}<a href="https://example.org/${'x'.repeat(150)}">link</a></p>`;

const HTML_ONLY: [string, Partial<OutgoingMessage>][] = [
  ['plain ASCII, short lines (7bit)', { html: '<p>Hello there</p>\n<p>Bye</p>' }],
  ['non-ASCII subject, name and body', { subject: 'Grüße aus Köln – 10 % off', to: { name: 'Zoë Müller', address: 'zoe@example.org' }, html: '<p>Hallo Zoë, schöne Grüße</p>' }],
  ['a long ASCII subject', { subject: `A long subject ${'that goes on '.repeat(12)}and ends here` }],
  ['a long non-ASCII subject', { subject: `Überraschung: ${'Äpfel und Birnen für alle, '.repeat(6)}` }],
  ['a subject with a long run without spaces', { subject: `Token ${'x'.repeat(120)} end` }],
  ['names with commas, quotes and backslashes', { from: { name: 'Lovelace, Ada "The Countess" \\ Byron', address: `ada@${DOMAIN}` }, to: { name: 'Smith, John', address: 'john@example.org' } }],
  ['a Cyrillic name and body (base64)', { to: { name: 'Иван Петров', address: 'ivan@example.org' }, subject: 'Привет, Иван', html: '<p>Здравствуйте, Иван! Это письмо на русском языке.</p>' }],
  ['no display names', { from: { address: `bare@${DOMAIN}` }, to: { address: 'bare@example.org' } }],
  ['long lines, dots, CR/LF/CRLF mixed, trailing whitespace', { html: `${longLine}\n.starts with a dot\r\n..two dots\rlone CR\n\ttabbed   \n.\nend   ` }],
  ['emoji and CJK', { subject: 'Sale 🎉 今日だけ', html: '<p>🎉 今日だけのセール 🎉 — café</p>\n'.repeat(20) }],
  [
    'custom headers: unsubscribe, X-, non-ASCII and long values',
    {
      replyTo: `support@${DOMAIN}`,
      headers: {
        'List-Unsubscribe': `<https://tidings.example.com/unsubscribe/${'t'.repeat(90)}>`,
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        'X-Invoice-Id': 'INV-2026-001',
        'X-Note': 'Prüfung bestanden',
        'X-Long': `${'several words here '.repeat(10)}end`,
        'X-Empty': '   ',
      },
    },
  ],
];

/** Everything a reader sees, minus what differs by nature (Date, the signature). */
function readable(p: ParsedMail) {
  const headers = Object.fromEntries([...p.headers].filter(([k]) => k !== 'date' && k !== 'dkim-signature'));
  // A multipart boundary is random.
  const type = headers['content-type'] as { params: Record<string, string> };
  if (type.params.boundary) type.params.boundary = 'random';
  return { headers, subject: p.subject, from: p.from?.value, to: [p.to ?? []].flat().map((a) => a.value), replyTo: p.replyTo?.value, html: p.html, text: p.text, attachments: p.attachments.map((a) => [a.filename, a.contentType, a.content.toString('base64')]) };
}

async function verified(raw: Buffer) {
  const result = await dkimVerify(raw, { resolver });
  return result.results.map((r) => [r.status.result, r.signingDomain]);
}

/** Sends the message both ways and returns what the relay received from each. */
async function bothWays(message: OutgoingMessage) {
  const before = sink.messages.length;
  await reference.sendMail(message);
  await mailer.send(message);
  const [theirs, ours] = (await sink.waitFor(before + 2)).slice(before);
  return { theirs: theirs!, ours: ours! };
}

describe.each(HTML_ONLY)('HTML-only: %s', (_name, over) => {
  test('reads as nodemailer’s, signed, CRLF, lines within limits', async () => {
    const message = base(over);
    expect(htmlOnlyMessage(message)).toBeDefined();
    const { theirs, ours } = await bothWays(message);
    expect(ours.envelope).toEqual(theirs.envelope);
    expect(readable(await simpleParser(ours.raw))).toEqual(readable(await simpleParser(theirs.raw)));
    expect(await verified(ours.raw)).toEqual([['pass', DOMAIN]]);

    const text = ours.raw.toString('latin1');
    expect(text.replace(/\r\n/g, '')).not.toMatch(/[\r\n]/);
    const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
    expect(head).not.toMatch(/[^\x20-\x7e\r\n\t]/);
    for (const line of head.split('\r\n')) {
      expect(line.length).toBeLessThanOrEqual(998);
      expect(line.trim()).not.toBe('');
    }
    for (const line of body.split('\r\n')) expect(line.length).toBeLessThanOrEqual(76);
  });
});

test('text that looks like an encoded word stays the text it is (nodemailer let readers decode it)', async () => {
  const subject = 'Literal =?UTF-8?Q?not_encoded?= text';
  const { theirs, ours } = await bothWays(base({ subject, from: { name: 'A =?UTF-8?Q?B?=', address: `a@${DOMAIN}` } }));
  const [mine, nodemailers] = [await simpleParser(ours.raw), await simpleParser(theirs.raw)];
  expect(mine.subject).toBe(subject);
  expect(nodemailers.subject).toBe('Literal not encoded text');
  expect(mine.from?.value[0]?.name).toBe('A =?UTF-8?Q?B?=');
  expect(await verified(ours.raw)).toEqual([['pass', DOMAIN]]);
});

test('a lone CR in the body: the signature still verifies (nodemailer’s did not)', async () => {
  const { theirs, ours } = await bothWays(base({ html: '<p>one\rtwo</p>' }));
  expect((await simpleParser(ours.raw)).html).toBe((await simpleParser(theirs.raw)).html);
  expect(await verified(ours.raw)).toEqual([['pass', DOMAIN]]);
  expect((await verified(theirs.raw))[0]![0]).not.toBe('pass');
});

test('the transfer encoding follows nodemailer’s choice', async () => {
  const cte = async (html: string) => (await simpleParser((await renderMessage(base({ html }))).raw)).headers.get('content-transfer-encoding');
  expect(await cte('<p>short ascii</p>')).toBe('7bit');
  expect(await cte(longLine)).toBe('quoted-printable');
  expect(await cte('<p>Grüße</p>')).toBe('quoted-printable');
  expect(await cte('<p>Здравствуйте</p>')).toBe('base64');
});

test('the signature covers what nodemailer signs, and breaks when a signed header or the body changes', async () => {
  const message = base({ headers: { 'List-Unsubscribe': '<https://x.example/u>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click', 'X-Other': 'x' }, replyTo: `r@${DOMAIN}` });
  const { raw } = await renderMessage(message);
  const text = raw.toString('latin1');
  const h = /^DKIM-Signature:[^]*?\bh=([^;]+);/.exec(text)![1]!.replace(/\s+/g, '');
  expect(h.split(':')).toEqual(['from', 'reply-to', 'subject', 'date', 'message-id', 'to', 'mime-version', 'content-type', 'content-transfer-encoding', 'list-unsubscribe', 'list-unsubscribe-post']);
  expect(await verified(Buffer.from(text.replace('Subject: Hello', 'Subject: Hellp'), 'latin1'))).toEqual([['fail', DOMAIN]]);
  // mailauth says neutral for a body that no longer matches bh=.
  expect(await verified(Buffer.from(text.replace('<p>Hello</p>', '<p>Hellp</p>'), 'latin1'))).toEqual([['neutral', DOMAIN]]);
  // Relaxed canonicalisation: refolding and extra whitespace do not matter.
  expect(await verified(Buffer.from(text.replace('Subject: Hello', 'Subject:   Hello  '), 'latin1'))).toEqual([['pass', DOMAIN]]);
});

describe('MailComposer path', () => {
  const cases: [string, Partial<OutgoingMessage>][] = [
    ['a text alternative (account mail)', { text: 'Hello\nplain text, Grüße', html: '<p>Hello</p><p>Grüße</p>' }],
    [
      'attachments, inline and attached',
      {
        html: '<p>See <img src="cid:logo@x"></p>',
        attachments: [
          { filename: 'logo.png', content: Buffer.from('89504e470d0a1a0a', 'hex'), contentType: 'image/png', cid: 'logo@x', contentDisposition: 'inline' },
          { filename: 'Rechnung März.pdf', content: Buffer.from('%PDF-1.4 fake'), contentType: 'application/pdf' },
        ],
      },
    ],
    ['a reply-to with a display name', { replyTo: `Support <support@${DOMAIN}>` }],
    ['an internationalised domain (punycode)', { to: { name: 'Buch', address: 'leser@bücher.example' } }],
  ];
  test.each(cases)('%s: reads as nodemailer’s and is signed', async (_name, over) => {
    const message = base(over);
    expect(htmlOnlyMessage(message)).toBeUndefined();
    const { theirs, ours } = await bothWays(message);
    expect(ours.envelope).toEqual(theirs.envelope);
    expect(readable(await simpleParser(ours.raw))).toEqual(readable(await simpleParser(theirs.raw)));
    expect(await verified(ours.raw)).toEqual([['pass', DOMAIN]]);
  });

  test('unsigned without a key', async () => {
    const { raw } = await renderMessage(base({ dkim: undefined, text: 'plain' }));
    expect(raw.toString('latin1')).not.toMatch(/^DKIM-Signature/im);
    expect((await verified(raw)).map(([result]) => result)).toEqual(['none']);
  });
});

describe('relay errors keep nodemailer’s code and command', () => {
  const failure = async (m: Mailer, message = base({})) => {
    try {
      await m.send(message);
    } catch (err) {
      return err;
    }
    throw new Error('the send was accepted');
  };
  const fields = (err: unknown) => {
    expect(err).toBeInstanceOf(SmtpError);
    const e = err as SmtpError;
    return { responseCode: e.responseCode, permanent: e.permanent, code: e.code, command: e.command, unreachable: relayUnreachable(e) };
  };

  test('a 4xx after DATA: the message, not the relay', async () => {
    sink.failNext(451);
    expect(fields(await failure(mailer))).toEqual({ responseCode: 451, permanent: false, code: 'EMESSAGE', command: 'DATA', unreachable: false });
  });

  test('a 5xx for the recipient: permanent', async () => {
    sink.failNext(550, 1, { stage: 'rcpt' });
    expect(fields(await failure(mailer))).toEqual({ responseCode: 550, permanent: true, code: 'EENVELOPE', command: 'RCPT TO', unreachable: false });
  });

  test('421 at the greeting: unreachable', async () => {
    const own = createSmtpMailer(sink.url);
    sink.failNext(421, 1, { stage: 'connect' });
    try {
      expect(fields(await failure(own))).toMatchObject({ responseCode: 421, permanent: false, command: 'CONN', unreachable: true });
    } finally {
      own.close();
    }
  });

  test('connection refused: no reply, a connection code, unreachable', async () => {
    const closed = await startSmtpSink();
    await closed.stop();
    const own = createSmtpMailer(closed.url);
    try {
      const f = fields(await failure(own));
      expect(f).toMatchObject({ responseCode: undefined, permanent: false, command: 'CONN', unreachable: true });
      expect(['ECONNECTION', 'ESOCKET']).toContain(f.code);
    } finally {
      own.close();
      await closed.close();
    }
  });

  test('bigger than the SIZE the relay advertises: refused for good, not an outage', async () => {
    const small = await startSmtpSink({ size: 2000 });
    const own = createSmtpMailer(small.url);
    try {
      const f = fields(await failure(own, base({ html: `<p>${'big '.repeat(2000)}</p>` })));
      expect(f).toEqual({ responseCode: 552, permanent: true, code: 'EMESSAGE', command: 'DATA', unreachable: false });
    } finally {
      own.close();
      await small.close();
    }
  });

  test('an error building the message is not an SmtpError', async () => {
    const { privateKey: ed } = generateKeyPairSync('ed25519');
    const before = sink.messages.length;
    const err = await failure(mailer, base({ dkim: { ...dkim, privateKey: ed } }));
    expect(err).not.toBeInstanceOf(SmtpError);
    expect(sink.messages.length).toBe(before);
    expect(relayUnreachable(err)).toBe(false);
  });
});

test('relayUnreachable: 421 or a failed session without a reply; never a reply about the message', () => {
  const e = (responseCode: number | undefined, code?: string, command?: string) =>
    relayUnreachable(new SmtpError('x', responseCode, responseCode !== undefined && responseCode >= 500, code, command));
  expect(e(421, 'EENVELOPE', 'MAIL FROM')).toBe(true);
  expect(e(undefined, 'ECONNECTION', 'CONN')).toBe(true);
  expect(e(undefined, 'ETIMEDOUT', 'CONN')).toBe(true);
  expect(e(undefined, 'ESOCKET', 'CONN')).toBe(true);
  expect(e(undefined, 'EDNS', 'CONN')).toBe(true);
  expect(e(undefined, 'EPROTOCOL', 'CONN')).toBe(true);
  expect(e(undefined, 'ECONNECTION', 'API')).toBe(true);
  // nodemailer gave no code at all (the pool closed under the send): nothing was said about the message.
  expect(e(undefined)).toBe(true);
  expect(e(undefined, 'EMESSAGE', 'API')).toBe(false);
  expect(e(undefined, 'ESTREAM', 'API')).toBe(false);
  expect(e(undefined, 'EENVELOPE', 'API')).toBe(false);
  expect(e(451, 'EMESSAGE', 'DATA')).toBe(false);
  expect(e(450, 'EENVELOPE', 'RCPT TO')).toBe(false);
  expect(e(554, 'EMESSAGE', 'DATA')).toBe(false);
  expect(relayUnreachable(new Error('ECONNREFUSED'))).toBe(false);
});
