/**
 * CPU per message of building and DKIM-signing one email, nodemailer's way against
 * mail/compose.ts renderMessage's fast path (mail/mime.ts + mail/dkim-sign.ts), in one run:
 *
 *   npx tsx bench/compose.ts                  # 5,000 messages a side, 5 interleaved rounds
 *   npx tsx bench/compose.ts --n 1000 --rounds 3 --in-flight 8
 *
 * The messages are campaign emails as the service renders them (db/messages/content.ts: marketing
 * footer, List-Unsubscribe headers, tracked links and the open pixel), a short one and a
 * newsletter-sized one, with non-ASCII names and text. No database or relay is involved.
 *
 * - nodemailer: MailComposer builds the message and nodemailer's DKIM signer signs the stream,
 *   as nodemailer's sendMail does (the relay's part excluded);
 * - fast path: renderMessage, the bytes the service's mailer hands to the transport as they are.
 *
 * `cpu` is the process's user+system time per message, the libuv thread pool included (where the
 * fast path signs); `main` is the event loop's busy time per message (performance
 * eventLoopUtilization), the part that competes with everything else the worker does.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import DKIM from 'nodemailer/lib/dkim';
import MailComposer from 'nodemailer/lib/mail-composer';
import { compileContent, renderForContact } from '../db/messages/content';
import { composeMessage, type OutgoingMessage, renderMessage, type StoredEmail } from '../mail/compose';
import { closedLoop, log, positiveInt } from './support';

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? fallback : positiveInt(name, args[i + 1]);
};
const N = option('n', 5000);
const ROUNDS = option('rounds', 5);
const IN_FLIGHT = option('in-flight', 8);

const SHORT =
  '<html><body><h1>Hello {{first ?? "there"}}</h1><p>Our autumn update, number {{n}}.</p>' +
  '<p><a href="https://example.org/read?id={{n}}">Read more</a></p></body></html>';

const paragraph = (i: number) =>
  `<tr><td style="padding:12px 24px;font-family:Helvetica,Arial,sans-serif;font-size:15px;line-height:1.5;color:#333">` +
  `<h2 style="margin:0 0 8px">Story ${i}: what changed this week</h2>` +
  `<p>Dear {{first ?? "reader"}}, this is paragraph ${i} of the newsletter. It runs long enough to be folded by ` +
  `quoted-printable encoding, mentions a café, a naïve façade and Zürich, and links to ` +
  `<a href="https://example.org/stories/${i}?utm_source=newsletter&amp;utm_medium=email&amp;n={{n}}">the whole story</a>.</p>` +
  `</td></tr>\n`;
const NEWSLETTER =
  '<!doctype html><html><head><meta charset="utf-8"><title>Weekly</title></head><body style="margin:0;background:#f4f4f4">\n' +
  '<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tbody>\n' +
  Array.from({ length: 12 }, (_, i) => paragraph(i + 1)).join('') +
  '</tbody></table></body></html>\n';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const dkim = { domainName: 'bench.example.com', keySelector: 'tidings', privateKey };
const nodemailerDkim = new DKIM(dkim);

function messages(body: string, count: number): OutgoingMessage[] {
  const content = compileContent('Grüße, {{first ?? "reader"}}: your weekly update', body);
  const now = new Date().toISOString();
  return Array.from({ length: count }, (_, n) => {
    const id = randomUUID();
    const contact = { id: `cnt_${n}`, email: `reader${n}@example.org`, subscribed: true, data: { first: n % 3 ? 'Zoë' : 'Ada' }, createdAt: now, updatedAt: now };
    const rendered = renderForContact(content, contact, {
      extra: { n },
      publicUrl: 'https://tidings.example.com',
      linkSecret: 'bench-link-secret',
      marketing: { projectName: 'Bench' },
      tracking: { emailId: id },
    });
    const email: StoredEmail = {
      id,
      toEmail: contact.email,
      toName: n % 2 ? 'Zoë Müller' : 'Ada Lovelace',
      fromEmail: 'news@bench.example.com',
      fromName: 'Bench News',
      replyTo: null,
      ...rendered,
      attachments: [],
    };
    return composeMessage(email, dkim);
  });
}

async function viaNodemailer(message: OutgoingMessage): Promise<number> {
  const { dkim: _key, ...mail } = message;
  const signed = nodemailerDkim.sign(new MailComposer(mail).compile().createReadStream());
  let size = 0;
  for await (const chunk of signed) size += (chunk as Buffer).length;
  return size;
}

const viaFastPath = async (message: OutgoingMessage) => (await renderMessage(message)).raw.length;

interface Tally {
  cpuMs: number;
  mainMs: number;
  count: number;
  bytes: number;
}

async function measure(batch: OutgoingMessage[], run: (m: OutgoingMessage) => Promise<number>, into: Tally) {
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  let bytes = 0;
  await closedLoop(batch.length, IN_FLIGHT, async (i) => {
    const size = await run(batch[i]!);
    bytes += size;
  });
  const used = process.cpuUsage(cpu);
  into.cpuMs += (used.user + used.system) / 1000;
  into.mainMs += performance.eventLoopUtilization(elu).active;
  into.count += batch.length;
  into.bytes += bytes;
}

const perMessage = (t: Tally) => ({ cpu: t.cpuMs / t.count, main: t.mainMs / t.count, size: t.bytes / t.count });

async function main() {
  log(`${N} messages a side per body, ${ROUNDS} interleaved rounds, ${IN_FLIGHT} in flight`);
  for (const [name, body] of [
    ['short', SHORT],
    ['newsletter', NEWSLETTER],
  ] as const) {
    const batch = messages(body, N);
    // Warm-up: JIT and the key's first use, unmeasured.
    await measure(batch.slice(0, 300), viaNodemailer, { cpuMs: 0, mainMs: 0, count: 0, bytes: 0 });
    await measure(batch.slice(0, 300), viaFastPath, { cpuMs: 0, mainMs: 0, count: 0, bytes: 0 });
    const old: Tally = { cpuMs: 0, mainMs: 0, count: 0, bytes: 0 };
    const fast: Tally = { cpuMs: 0, mainMs: 0, count: 0, bytes: 0 };
    const size = Math.ceil(N / ROUNDS);
    for (let r = 0; r < ROUNDS; r++) {
      const slice = batch.slice(r * size, (r + 1) * size);
      // Alternating which goes first, so neither always runs on a warmer or cooler machine.
      if (r % 2) {
        await measure(slice, viaFastPath, fast);
        await measure(slice, viaNodemailer, old);
      } else {
        await measure(slice, viaNodemailer, old);
        await measure(slice, viaFastPath, fast);
      }
    }
    const o = perMessage(old);
    const f = perMessage(fast);
    console.log(
      `${name} (${Math.round(f.size)} bytes): nodemailer ${o.cpu.toFixed(3)} ms cpu (${o.main.toFixed(3)} main) | ` +
        `fast path ${f.cpu.toFixed(3)} ms cpu (${f.main.toFixed(3)} main) | ` +
        `cpu ${(o.cpu / f.cpu).toFixed(2)}x less, main thread ${(o.main / f.main).toFixed(2)}x less`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
