/**
 * The SMTP client alone: the same prepared messages through a nodemailer pool (the raw baseline
 * of bench/send.ts and bench/campaign.ts) and through mail/smtp-pool.ts (the service's client),
 * 5 connections each, to the test SMTP sink running in a
 * child process, so that this process's CPU is the client's alone:
 *
 *   npx tsx bench/smtp.ts                        # 5,000 messages a side, 3 interleaved rounds
 *   npx tsx bench/smtp.ts --n 2000 --rounds 5 --in-flight 16
 *
 * Messages are built once beforehand (mail/compose.ts renderMessage, unsigned, a campaign-sized
 * HTML body); the clock covers handing them to the client until the relay's last 250.
 */
import { fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import nodemailer from 'nodemailer';
import { composeMessage, renderMessage } from '../mail/compose';
import { SmtpPool, smtpOptionsFromUrl } from '../mail/smtp-pool';
import { startSmtpSink } from '../test/helpers/smtp';
import { closedLoop, log, positiveInt } from './support';

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? fallback : positiveInt(name, args[i + 1]);
};

type SinkMessage = { url: string } | { cpuMs: number; received: number };

/** In the child: the sink, reporting its CPU time and message count when asked. */
async function runSink(): Promise<void> {
  const sink = await startSmtpSink();
  let received = 0;
  setInterval(() => {
    received += sink.messages.length;
    sink.clear();
  }, 200);
  process.on('message', () => {
    const cpu = process.cpuUsage();
    process.send!({ cpuMs: (cpu.user + cpu.system) / 1000, received: received + sink.messages.length } satisfies SinkMessage);
  });
  process.send!({ url: sink.url } satisfies SinkMessage);
}

async function main(): Promise<void> {
  const N = option('n', 5000);
  const ROUNDS = option('rounds', 3);
  const IN_FLIGHT = option('in-flight', 32);
  const child = fork(__filename, ['--sink'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const next = () => new Promise<SinkMessage>((resolve) => child.once('message', (m) => resolve(m as SinkMessage)));
  const sinkUrl = ((await next()) as { url: string }).url;
  const sinkState = async () => {
    const reply = next();
    child.send('state');
    return (await reply) as { cpuMs: number; received: number };
  };

  const paragraph = '<p>Our autumn update: what changed, what is next, and a link to read more on the site.</p>\n';
  const messages = await Promise.all(
    Array.from({ length: N }, (_, i) =>
      renderMessage(
        composeMessage(
          {
            id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
            toEmail: `reader${i}@bench.example.org`,
            toName: `Reader ${i}`,
            fromEmail: 'news@bench.example.com',
            fromName: 'Bench News',
            replyTo: null,
            subject: `Update ${i}`,
            body: `<html><body>${paragraph.repeat(40)}</body></html>`,
            headers: {},
            attachments: [],
          },
          undefined,
        ),
      ),
    ),
  );

  const url = new URL(sinkUrl);
  url.searchParams.set('pool', 'true');
  url.searchParams.set('maxConnections', '5');
  const theirs = nodemailer.createTransport(url.toString());
  const ours = new SmtpPool(smtpOptionsFromUrl(sinkUrl));
  const clients = {
    nodemailer: (i: number) => theirs.sendMail({ envelope: messages[i]!.envelope, raw: messages[i]!.raw }),
    'smtp-pool': (i: number) => ours.send(messages[i]!.envelope.from, messages[i]!.envelope.to, messages[i]!.raw),
  };
  const figures: Record<string, { rate: number; cpuMs: number; sinkCpuMs: number }[]> = { nodemailer: [], 'smtp-pool': [] };
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, send] of Object.entries(clients)) {
        const sinkBefore = await sinkState();
        const cpu = process.cpuUsage();
        const start = performance.now();
        await closedLoop(N, IN_FLIGHT, async (i) => void (await send(i)));
        const seconds = (performance.now() - start) / 1000;
        const used = process.cpuUsage(cpu);
        const sinkAfter = await sinkState();
        if (sinkAfter.received - sinkBefore.received !== N) throw new Error(`${name}: the sink got ${sinkAfter.received - sinkBefore.received} of ${N}`);
        figures[name]!.push({ rate: N / seconds, cpuMs: (used.user + used.system) / 1000 / N, sinkCpuMs: (sinkAfter.cpuMs - sinkBefore.cpuMs) / N });
        log(`round ${round} ${name}: ${(N / seconds).toFixed(0)} msg/s`);
      }
    }
  } finally {
    theirs.close();
    ours.close();
    child.kill();
  }

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const row = (name: string) => {
    const f = figures[name]!;
    return { rate: median(f.map((x) => x.rate)), cpu: median(f.map((x) => x.cpuMs)), sink: median(f.map((x) => x.sinkCpuMs)) };
  };
  const [a, b] = [row('nodemailer'), row('smtp-pool')];
  const lines = [
    '',
    `SMTP client bench: ${N} prepared messages (${messages[0]!.raw.length} bytes) a side, ${IN_FLIGHT} in flight, 5 connections, ${ROUNDS} interleaved rounds (medians)`,
    `  nodemailer    ${a.rate.toFixed(0)} msg/s; client CPU ${a.cpu.toFixed(3)} ms/message; sink CPU ${a.sink.toFixed(3)} ms/message`,
    `  smtp-pool     ${b.rate.toFixed(0)} msg/s; client CPU ${b.cpu.toFixed(3)} ms/message; sink CPU ${b.sink.toFixed(3)} ms/message`,
    `  ratio         rate ${(b.rate / a.rate).toFixed(2)} ×; client CPU ${(b.cpu / a.cpu).toFixed(2)} ×`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv.includes('--sink')) void runSink();
else
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
