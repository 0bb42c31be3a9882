/**
 * Transactional send benchmark: N emails through POST /v1/send with concurrent keep-alive clients,
 * from the API to the SMTP relay, DKIM-signed.
 *
 *   npx tsx bench/send.ts [--n 2000] [--concurrency 16] [--recipients-per-request 1]
 *
 * It sets everything up on loopback itself (bench/harness.ts startStack + verifiedDomain) and
 * tears it down again:
 *  - a fresh database on the PostgreSQL server at BENCH_POSTGRES_ADMIN_URL (default
 *    postgres://postgres@127.0.0.1:5432/postgres), migrated, dropped at the end;
 *  - an in-memory, headless Temporal dev server on a free port (cli/temporal-server.ts);
 *  - the test DNS server and SMTP sink (test/helpers), the relay every email goes to;
 *  - in this process, wired as cli/start.ts wires them: the API (createApp) on a free port with
 *    RATE_LIMIT_PER_MINUTE raised, and a Temporal worker with the orm, resolver and mailer;
 *  - a project with a domain whose DKIM/SPF/DMARC records are published in the DNS server and
 *    verified with GET /domains/:id/verify, so every email is signed.
 *
 * "Accepted" is the rate the API answers 200 (the rows are queued and a workflow started);
 * "delivered" is the rate mail reaches the sink, which includes the workflow and activity
 * round trips through the Temporal server. The load generator, API, worker and sink share one
 * Node process, and all of it shares the machine with PostgreSQL and Temporal.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import type { SmtpMessage } from '../test/helpers/smtp';
import { BENCH_RATE_LIMIT, headersOf, startStack, Teardown, verifiedDomain, type Interruption, runBench } from './harness';
import { closedLoop, environmentLine, log, percentile, positiveInt, RequestTally } from './support';

const LOG_LEVEL = 'warn';
const DOMAIN = 'bench-send.test';
const SUBJECT = 'Your order {{order}} has shipped';
const BODY = '<p>Hi {{name ?? "there"}},</p><p>order {{order}} is on its way.</p>';

function options() {
  const { values } = parseArgs({
    options: {
      n: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '16' },
      'recipients-per-request': { type: 'string', default: '1' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/send.ts [--n 2000] [--concurrency 16] [--recipients-per-request 1]\n');
    process.exit(0);
  }
  return {
    n: positiveInt('n', values.n),
    concurrency: positiveInt('concurrency', values.concurrency),
    perRequest: positiveInt('recipients-per-request', values['recipients-per-request']),
  };
}

/** Request i carries emails i*per … (i+1)*per-1 (the last one fewer); each recipient is a new contact. */
function sendBody(i: number, n: number, perRequest: number) {
  const to = [];
  for (let k = i * perRequest; k < Math.min(n, (i + 1) * perRequest); k++) to.push({ name: `User ${k}`, email: `user${k}@bench.example.org` });
  return {
    to: to.length === 1 ? to[0] : to,
    from: { name: 'Bench', email: `orders@${DOMAIN}` },
    subject: SUBJECT,
    body: BODY,
    // One-shot: used for this render, not stored on the contacts.
    data: { order: { value: `#${100_000 + i}`, persistent: false } },
  };
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const requests = Math.ceil(opts.n / opts.perRequest);
  const stack = await startStack({ teardown, checkpoint: stop.checkpoint, concurrency: opts.concurrency, logLevel: LOG_LEVEL });
  const { db, sink, orm, client } = stack;
  await verifiedDomain(stack, DOMAIN);
  log(`domain ${DOMAIN} verified; sending ${opts.n} emails in ${requests} requests with ${opts.concurrency} clients`);

  // The load. Latencies are per request; every email id the API returns is expected at the sink.
  const tally = new RequestTally(requests);
  const expected = new Set<string>();
  let lastOk = 0;
  const loadBefore = os.loadavg()[0]!;
  const cpuBefore = process.cpuUsage();
  const wallStart = Date.now();
  const start = performance.now();
  // Both rates over time, to see whether delivery keeps pace while the API is busy and after.
  let accepted = 0;
  let last = { accepted: 0, delivered: 0 };
  const progress = setInterval(() => {
    const now = { accepted, delivered: sink.messages.length };
    log(`${((performance.now() - start) / 1000).toFixed(0)} s: accepted ${now.accepted} (+${((now.accepted - last.accepted) / 5).toFixed(0)}/s), delivered ${now.delivered} (+${((now.delivered - last.delivered) / 5).toFixed(0)}/s)`);
    last = now;
  }, 5_000);
  teardown.add(async () => clearInterval(progress));
  await closedLoop(requests, opts.concurrency, async (i) => {
    if (stop.interrupted) return;
    const res = await tally.request(() => client.request('POST', '/v1/send', sendBody(i, opts.n, opts.perRequest)));
    if (res) {
      lastOk = performance.now();
      for (const e of (res.body as { data: { emails: { email: string }[] } }).data.emails) expected.add(e.email);
      accepted = expected.size;
    }
  });
  const acceptedS = (lastOk - start) / 1000;
  log(`${expected.size} emails accepted in ${acceptedS.toFixed(1)} s; waiting for the sink`);

  // Delivery: until the sink holds as many messages as were accepted (or nothing arrives for a minute).
  let lastCount = -1;
  let lastProgress = Date.now();
  while (!stop.interrupted && sink.messages.length < expected.size && Date.now() - lastProgress < 60_000) {
    if (sink.messages.length !== lastCount) [lastCount, lastProgress] = [sink.messages.length, Date.now()];
    await new Promise((r) => setTimeout(r, 50));
  }
  const arrived: SmtpMessage | undefined = sink.messages[expected.size - 1];
  const deliveredS = arrived ? (arrived.receivedAt.getTime() - wallStart) / 1000 : NaN;
  clearInterval(progress);
  const cpu = process.cpuUsage(cpuBefore);
  const cpuS = (cpu.user + cpu.system) / 1e6;

  // Rows are marked SENT by a second activity just after the relay accepts; give them a moment.
  const rowCounts = async () => {
    const rows = await orm.em.fork().getConnection().execute<{ status: string; n: string }[]>(
      'select status, count(*) as n from emails group by status',
    );
    return new Map(rows.map((r) => [r.status, Number(r.n)]));
  };
  let rows = await rowCounts();
  for (const deadline = Date.now() + 30_000; !stop.interrupted && (rows.get('SENT') ?? 0) < expected.size && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 200));
    rows = await rowCounts();
  }

  // Every accepted email at the sink exactly once (by Message-ID), signed for the domain; nothing else.
  const seen = new Map<string, number>();
  let unsigned = 0;
  for (const m of sink.messages) {
    const h = headersOf(m.raw);
    const id = h.messageId?.slice(1, h.messageId.indexOf('@'));
    if (id) seen.set(id, (seen.get(id) ?? 0) + 1);
    if (h.dkimDomain !== DOMAIN) unsigned++;
  }
  const once = [...expected].filter((id) => seen.get(id) === 1).length;
  const duplicated = [...seen.values()].filter((c) => c > 1).length;
  const unexpected = [...seen.keys()].filter((id) => !expected.has(id)).length;
  const sent = rows.get('SENT') ?? 0;
  const totalRows = [...rows.values()].reduce((a, b) => a + b, 0);
  // Requests never sent because of Ctrl-C are not errors; the check fails on them anyway.
  const errors = tally.done - tally.ok;
  const checkOk =
    !stop.interrupted && errors === 0 && expected.size === opts.n && once === opts.n && duplicated === 0 && unexpected === 0 &&
    unsigned === 0 && sink.messages.length === opts.n && sent === opts.n && totalRows === opts.n;

  const sorted = Float64Array.from(tally.latencies.subarray(0, tally.done)).sort();
  const ms = (v: number) => `${v.toFixed(1)} ms`;
  const rate = (count: number, s: number) => (count / s).toFixed(0);
  const lines = [
    '',
    `Tidings send bench: POST /v1/send, N=${opts.n} emails in ${requests} requests (${opts.perRequest} recipient(s) each), concurrency ${opts.concurrency} keep-alive clients${stop.interrupted ? ` (interrupted after ${tally.done} requests)` : ''}`,
    `  environment   ${environmentLine(db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${os.loadavg()[0]!.toFixed(1)} after (1-minute; other work on the machine skews the figures)`,
    `  setup         one Node process runs the load generator, the API (createApp, LOG_LEVEL=${LOG_LEVEL}), the Temporal worker (default options), the DNS server and the SMTP sink;`,
    `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
    `  rate limit    RATE_LIMIT_PER_MINUTE raised to ${BENCH_RATE_LIMIT} (default 1000): the limiter still counts every request but never throttles`,
    `  message       DKIM-signed (RSA-2048) HTML rendered per recipient from subject "${SUBJECT}" and body "${BODY}"`,
    `  accepted      ${expected.size} emails in ${acceptedS.toFixed(2)} s: ${rate(expected.size, acceptedS)} emails/s, ${rate(tally.ok, acceptedS)} requests/s at the API (until the last 200)`,
    `  latency       p50 ${ms(percentile(sorted, 50))}   p95 ${ms(percentile(sorted, 95))}   p99 ${ms(percentile(sorted, 99))}   max ${ms(sorted[sorted.length - 1] ?? NaN)}`,
    `  delivered     ${arrived ? `${expected.size} emails in ${deliveredS.toFixed(2)} s: ${rate(expected.size, deliveredS)} emails/s at the sink (first request to last message)` : `only ${sink.messages.length} of ${expected.size} arrived`}`,
    `  cpu           this process (load generator, API, worker, sink) used ${cpuS.toFixed(1)} CPU-s until the last delivery: ${((1000 * cpuS) / Math.max(1, expected.size)).toFixed(1)} ms per email`,
    `  errors        ${errors}${tally.errorDetail()}`,
    `  check         ${checkOk ? 'OK' : 'FAILED'}: ${once}/${opts.n} emails at the sink exactly once by Message-ID (${duplicated} duplicated, ${unexpected} unexpected, ${unsigned} not signed for ${DOMAIN}); ${sent}/${opts.n} emails rows SENT (${[...rows].map(([k, v]) => `${k} ${v}`).join(', ')})`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
