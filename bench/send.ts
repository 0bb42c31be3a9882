/**
 * Transactional send benchmark: N emails through POST /v1/send with concurrent keep-alive clients,
 * from the API to the SMTP relay, DKIM-signed, against a raw nodemailer pool to the same relay
 * measured in the same run.
 *
 *   npx tsx bench/send.ts [--n 2000] [--concurrency 16] [--recipients-per-request 1] [--raw 2000] [--one-at-a-time 50] [--service in-process|process] [--progress-seconds 5] [--warm-up 4000]
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
 * Phases, one after the other:
 *  0. a warm-up: --warm-up sends (4,000) to other recipients, then ANALYZE, outside every figure and
 *     check: enough that V8 has optimized the request path before the load (JIT_WARM_UP_REQUESTS);
 *  1. raw: --raw messages like the API's (same template, rendered and DKIM-signed with the domain's
 *     key) through a fresh nodemailer pool straight to the sink, --concurrency in flight
 *     (bench/baselines.ts rawPoolRate);
 *  2. the load: N emails through /v1/send, then until every accepted email is at the sink.
 *     "Accepted" is the rate the API answers 200; "delivered" the rate mail reaches the sink,
 *     first request to last message, whatever happens in between (workflows, outbox, batches);
 *  3. one at a time: --one-at-a-time single sends on the now idle service, each after the last one
 *     arrived and a pause, timed from the request to the message's arrival at the sink;
 *  4. raw again; the mean of the two raw runs is the reference "delivered / raw" is taken against.
 * Every email id the API answered must reach the sink exactly once (by Message-ID, whose local part
 * is the email id), signed for the domain, and end SENT in the emails table.
 *
 * With `--service in-process` (the default) the load generator, API, worker and sink share one
 * Node process; with `--service process` the service runs as `npm start` runs it (the build,
 * `tidings start`: API + worker in one process of its own; BENCH_SERVICE_FROM_SOURCE=1 runs the
 * source through tsx instead) and this process keeps the load generator and the sink,
 * so CPU per email is the service's alone. Either way all of it shares the machine with
 * PostgreSQL and Temporal. BENCH_SERVICE_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" profiles the
 * service process.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import type { SmtpMessage } from '../test/helpers/smtp';
import { rawPoolRate, type RawFigures, type RawMessageSpec } from './baselines';
import { BENCH_RATE_LIMIT, JIT_WARM_UP_REQUESTS, cpuSecondsOf, cpuSnapshot, headersOf, mainThreadOf, SERVICE_CODE, serviceMode, type Stack, startStack, Teardown, verifiedDomain, type Interruption, runBench, warmUp } from './harness';
import { closedLoop, environmentLine, goalLines, log, percentile, positiveInt, RequestTally } from './support';

const LOG_LEVEL = 'warn';
const DOMAIN = 'bench-send.test';
const FROM = { name: 'Bench', email: `orders@${DOMAIN}` };
const SUBJECT = 'Your order {{order}} has shipped';
const BODY = '<p>Hi {{name ?? "there"}},</p><p>order {{order}} is on its way.</p>';
/** The warm-up's recipients, whose emails the checks leave out. */
const WARMUP_PREFIX = 'warmup';
/** Between two one-at-a-time sends: the last one's bookkeeping (its SENT mark) is done by then. */
const ONE_AT_A_TIME_PAUSE_MS = 100;

/** The raw reference's messages: what /v1/send renders for a new contact (its name stored, the order one-shot). */
const RAW_MESSAGE: RawMessageSpec = {
  subject: SUBJECT,
  body: BODY,
  fromEmail: FROM.email,
  fromName: FROM.name,
  marketing: false,
  tracking: false,
  recipient: (i) => ({ name: `User ${i}`, data: { name: `User ${i}` }, extra: { order: `#${100_000 + i}` } }),
};

function options() {
  const { values } = parseArgs({
    options: {
      n: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '16' },
      'recipients-per-request': { type: 'string', default: '1' },
      raw: { type: 'string', default: '2000' },
      'one-at-a-time': { type: 'string', default: '50' },
      // 1 shows the first seconds of a run apart (with too short a warm-up they run below the steady rate).
      'progress-seconds': { type: 'string', default: '5' },
      'warm-up': { type: 'string', default: String(JIT_WARM_UP_REQUESTS) },
      service: { type: 'string', default: 'in-process' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      'Usage: npx tsx bench/send.ts [--n 2000] [--concurrency 16] [--recipients-per-request 1] [--raw 2000] [--one-at-a-time 50] [--service in-process|process] [--progress-seconds 5] [--warm-up 4000]\n',
    );
    process.exit(0);
  }
  return {
    n: positiveInt('n', values.n),
    concurrency: positiveInt('concurrency', values.concurrency),
    perRequest: positiveInt('recipients-per-request', values['recipients-per-request']),
    raw: positiveInt('raw', values.raw),
    oneAtATime: values['one-at-a-time'] === '0' ? 0 : positiveInt('one-at-a-time', values['one-at-a-time']),
    progressSeconds: positiveInt('progress-seconds', values['progress-seconds']),
    warmUp: positiveInt('warm-up', values['warm-up']),
    service: serviceMode(values.service),
  };
}

/** A send to these recipients (each a new contact) with a one-shot order number, used for this render and not stored. */
function sendBody(to: { name: string; email: string }[], order: number) {
  return {
    to: to.length === 1 ? to[0] : to,
    from: FROM,
    subject: SUBJECT,
    body: BODY,
    data: { order: { value: `#${order}`, persistent: false } },
  };
}

/** Request i of the load carries emails i*per … (i+1)*per-1 (the last one fewer). */
function loadBody(i: number, n: number, perRequest: number) {
  const to = [];
  for (let k = i * perRequest; k < Math.min(n, (i + 1) * perRequest); k++) to.push({ name: `User ${k}`, email: `user${k}@bench.example.org` });
  return sendBody(to, 100_000 + i);
}

type SendAnswer = { data: { emails: { email: string }[] } };

/** The email id a message carries: the local part of its Message-ID. */
function emailIdOf(m: SmtpMessage): string | undefined {
  const id = headersOf(m.raw).messageId;
  return id?.slice(1, id.indexOf('@'));
}

/** The message for email `id`, looking at the sink's messages from index `from` on, as they arrive; undefined after `timeoutMs`. */
async function arrivalOf(sink: Stack['sink'], id: string, from: number, timeoutMs: number): Promise<SmtpMessage | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (let scanned = from; ; ) {
    for (; scanned < sink.messages.length; scanned++) if (emailIdOf(sink.messages[scanned]!) === id) return sink.messages[scanned];
    const left = deadline - Date.now();
    if (left <= 0) return undefined;
    await sink.waitFor(scanned + 1, left).catch(() => undefined);
  }
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const requests = Math.ceil(opts.n / opts.perRequest);
  const stack = await startStack({ teardown, checkpoint: stop.checkpoint, concurrency: opts.concurrency, logLevel: LOG_LEVEL, service: opts.service });
  const { db, sink, orm, client } = stack;
  const domainId = await verifiedDomain(stack, DOMAIN);
  stop.checkpoint();

  // ---- 0. A warm-up (bench/harness.ts warmUp); its rows are left out below.
  await warmUp(
    stack,
    stop,
    {
      n: opts.n,
      count: opts.warmUp,
      concurrency: opts.concurrency,
      tables: 'contacts, emails',
      what: 'sends',
      settle: async (count) => void (await sink.waitFor(count, 60_000).catch(() => undefined)),
    },
    (i) => client.request('POST', '/v1/send', sendBody([{ name: `Warm-up ${i}`, email: `${WARMUP_PREFIX}${i}@bench.example.org` }], 300_000 + i)),
  );
  sink.clear();
  stop.checkpoint();

  // ---- 1. The raw reference, before ----
  const rawBefore = await rawPoolRate(stack, domainId, RAW_MESSAGE, opts.raw, opts.concurrency);
  log(`raw nodemailer pool → sink: ${rawBefore.rate.toFixed(0)} msg/s`);
  stop.checkpoint();
  log(`domain ${DOMAIN} verified; sending ${opts.n} emails in ${requests} requests with ${opts.concurrency} clients`);

  // ---- 2. The load. Latencies are per request; every email id the API returns is expected at the sink ----
  const tally = new RequestTally(requests);
  const expected = new Set<string>();
  let lastOk = 0;
  const loadBefore = os.loadavg()[0]!;
  const cpuBefore = process.cpuUsage();
  const serviceCpuBefore = stack.servicePid ? cpuSecondsOf(stack.servicePid) : undefined;
  const mainThreadBefore = stack.servicePid ? mainThreadOf(stack.servicePid) : undefined;
  const othersBefore = cpuSnapshot(stack);
  const wallStart = Date.now();
  const start = performance.now();
  // Both rates over time, to see whether delivery keeps pace while the API is busy and after.
  let accepted = 0;
  let last = { accepted: 0, delivered: 0 };
  const progress = setInterval(() => {
    const now = { accepted, delivered: sink.messages.length };
    log(`${((performance.now() - start) / 1000).toFixed(0)} s: accepted ${now.accepted} (+${((now.accepted - last.accepted) / opts.progressSeconds).toFixed(0)}/s), delivered ${now.delivered} (+${((now.delivered - last.delivered) / opts.progressSeconds).toFixed(0)}/s)`);
    last = now;
  }, opts.progressSeconds * 1000);
  teardown.add(async () => clearInterval(progress));
  await closedLoop(requests, opts.concurrency, async (i) => {
    if (stop.interrupted) return;
    const res = await tally.request(() => client.request('POST', '/v1/send', loadBody(i, opts.n, opts.perRequest)));
    if (res) {
      lastOk = performance.now();
      for (const e of (res.body as SendAnswer).data.emails) expected.add(e.email);
      accepted = expected.size;
    }
  });
  const acceptedS = (lastOk - start) / 1000;
  const loadAccepted = expected.size;
  // The event loop answers every request: is it on a core all the load long, or waiting for one?
  const mainThreadAfter = stack.servicePid ? mainThreadOf(stack.servicePid) : undefined;
  log(`${loadAccepted} emails accepted in ${acceptedS.toFixed(1)} s; waiting for the sink`);

  // Delivery: until the sink holds as many messages as were accepted (or nothing arrives for a minute).
  let lastCount = -1;
  let lastProgress = Date.now();
  while (!stop.interrupted && sink.messages.length < loadAccepted && Date.now() - lastProgress < 60_000) {
    if (sink.messages.length !== lastCount) [lastCount, lastProgress] = [sink.messages.length, Date.now()];
    await new Promise((r) => setTimeout(r, 50));
  }
  const loadDelivered = sink.messages.length;
  const arrived: SmtpMessage | undefined = sink.messages[loadAccepted - 1];
  const deliveredS = arrived ? (arrived.receivedAt.getTime() - wallStart) / 1000 : NaN;
  clearInterval(progress);
  const cpu = process.cpuUsage(cpuBefore);
  const cpuS = (cpu.user + cpu.system) / 1e6;
  const serviceCpuS = serviceCpuBefore === undefined ? undefined : cpuSecondsOf(stack.servicePid!)! - serviceCpuBefore;
  const othersAfter = cpuSnapshot(stack);
  const postgresCpuS = othersAfter.postgres - othersBefore.postgres;
  const temporalCpuS = othersAfter.temporal - othersBefore.temporal;
  const loadAfter = os.loadavg()[0]!;

  // Rows are marked SENT just after the relay accepts (by whatever sends them); give them a moment.
  const rowCounts = async () => {
    const rows = await orm.em.fork().getConnection().execute<{ status: string; n: string }[]>(
      `select status, count(*) as n from emails where to_email not like '${WARMUP_PREFIX}%' group by status`,
    );
    return new Map(rows.map((r) => [r.status, Number(r.n)]));
  };
  const untilSent = async (count: number) => {
    let rows = await rowCounts();
    for (const deadline = Date.now() + 30_000; !stop.interrupted && (rows.get('SENT') ?? 0) < count && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 200));
      rows = await rowCounts();
    }
    return rows;
  };
  await untilSent(loadAccepted);

  // ---- 3. One email at a time on the idle service: request → message at the sink ----
  const single = new RequestTally(opts.oneAtATime);
  const toSink: number[] = [];
  let lostSingles = 0;
  for (let k = 0; k < opts.oneAtATime && !stop.interrupted; k++) {
    await new Promise((r) => setTimeout(r, ONE_AT_A_TIME_PAUSE_MS));
    const from = sink.messages.length;
    const sentAt = Date.now();
    const res = await single.request(() => client.request('POST', '/v1/send', sendBody([{ name: `Single ${k}`, email: `single${k}@bench.example.org` }], 200_000 + k)));
    const id = res && (res.body as SendAnswer).data.emails[0]?.email;
    if (!id) continue;
    expected.add(id);
    const message = await arrivalOf(sink, id, from, 30_000);
    if (message) toSink.push(message.receivedAt.getTime() - sentAt);
    else lostSingles++;
  }
  const rows = await untilSent(expected.size);
  // A late duplicate would otherwise go uncounted: give stragglers a moment before counting.
  await new Promise((r) => setTimeout(r, 500));

  // Every accepted email at the sink exactly once (by Message-ID), signed for the domain; nothing else.
  const seen = new Map<string, number>();
  let unsigned = 0;
  let withoutId = 0;
  for (const m of sink.messages) {
    const id = emailIdOf(m);
    if (id) seen.set(id, (seen.get(id) ?? 0) + 1);
    else withoutId++;
    if (headersOf(m.raw).dkimDomain !== DOMAIN) unsigned++;
  }
  const total = opts.n + opts.oneAtATime;
  const once = [...expected].filter((id) => seen.get(id) === 1).length;
  const duplicated = [...seen.values()].filter((c) => c > 1).length;
  const extraCopies = [...seen.values()].reduce((a, c) => a + Math.max(0, c - 1), 0);
  const missing = [...expected].filter((id) => !seen.has(id)).length;
  const unexpected = [...seen.keys()].filter((id) => !expected.has(id)).length + withoutId;
  const exactlyOnce = expected.size === total && once === total && duplicated === 0 && missing === 0 && unexpected === 0;
  const sent = rows.get('SENT') ?? 0;
  const totalRows = [...rows.values()].reduce((a, b) => a + b, 0);
  // Requests never sent because of Ctrl-C are not errors; the check fails on them anyway.
  const errors = tally.done - tally.ok + (single.done - single.ok);
  const atSink = sink.messages.length;
  const checkOk = !stop.interrupted && errors === 0 && exactlyOnce && unsigned === 0 && atSink === total && sent === total && totalRows === total;

  // ---- 4. The raw reference, after (it empties the sink: the checks above are done) ----
  const rawAfter: RawFigures = stop.interrupted ? rawBefore : await rawPoolRate(stack, domainId, RAW_MESSAGE, opts.raw, opts.concurrency);
  const raw = (rawBefore.rate + rawAfter.rate) / 2;
  const rawCpuMs = (rawBefore.cpuMs + rawAfter.cpuMs) / 2;
  const perEmailMs = (cpuSeconds: number) => (1000 * cpuSeconds) / Math.max(1, opts.n);
  const perEmail = (cpuSeconds: number) => perEmailMs(cpuSeconds).toFixed(2);
  const totalCpuS = cpuS + (serviceCpuS ?? 0) + postgresCpuS + temporalCpuS;

  const sorted = Float64Array.from(tally.latencies.subarray(0, tally.done)).sort();
  const singleSorted = Float64Array.from(toSink).sort();
  const singleApi = Float64Array.from(single.latencies.subarray(0, single.done)).sort();
  const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : 'n/a');
  const rate = (count: number, s: number) => (count / s).toFixed(0);
  const acceptedRate = loadAccepted / acceptedS;
  const deliveredRate = loadAccepted / deliveredS;
  const p99 = percentile(sorted, 99);
  const singleP50 = percentile(singleSorted, 50);
  const lines = [
    '',
    `Tidings send bench: POST /v1/send, N=${opts.n} emails in ${requests} requests (${opts.perRequest} recipient(s) each), concurrency ${opts.concurrency} keep-alive clients${stop.interrupted ? ` (interrupted after ${tally.done} requests)` : ''}`,
    `  environment   ${environmentLine(db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after the load (1-minute; other work on the machine skews the figures)`,
    ...(stack.servicePid
      ? [
          `  setup         the service is one process of its own (tidings start: API + worker, ${SERVICE_CODE}, NODE_ENV=production, LOG_LEVEL=${LOG_LEVEL}); this process runs the load generator, the DNS server and the SMTP sink;`,
          `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
        ]
      : [
          `  setup         one Node process runs the load generator, the API (createApp, LOG_LEVEL=${LOG_LEVEL}), the Temporal worker (default options), the DNS server and the SMTP sink;`,
          `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
        ]),
    `  rate limit    RATE_LIMIT_PER_MINUTE raised to ${BENCH_RATE_LIMIT} (default 1000): the limiter still counts every request but never throttles`,
    `  message       DKIM-signed (RSA-2048) HTML rendered per recipient from subject "${SUBJECT}" and body "${BODY}"`,
    `  raw pool      ${raw.toFixed(0)} msg/s: the same messages (rendered ahead, composed and signed on send) through a fresh nodemailer pool straight to the sink, ${opts.concurrency} in flight ` +
      `(${rawBefore.rate.toFixed(0)} before the load, ${rawAfter.rate.toFixed(0)} after; ${opts.raw} messages each; this process ${rawCpuMs.toFixed(2)} ms CPU per message, sink included)`,
    `  accepted      ${loadAccepted} emails in ${acceptedS.toFixed(2)} s: ${rate(loadAccepted, acceptedS)} emails/s, ${rate(tally.ok, acceptedS)} requests/s at the API (until the last 200)`,
    `  latency       p50 ${ms(percentile(sorted, 50))}   p95 ${ms(percentile(sorted, 95))}   p99 ${ms(p99)}   max ${ms(sorted[sorted.length - 1] ?? NaN)}`,
    `  delivered     ${arrived ? `${loadAccepted} emails in ${deliveredS.toFixed(2)} s: ${rate(loadAccepted, deliveredS)} emails/s at the sink (first request to last message)` : `only ${loadDelivered} of ${loadAccepted} arrived`}`,
    `  ratio         delivered / raw ${(deliveredRate / raw).toFixed(3)}; accepted / raw ${(acceptedRate / raw).toFixed(3)}`,
    `  one at a time ${toSink.length} single sends on the idle service, each after the last arrived and ${ONE_AT_A_TIME_PAUSE_MS} ms: request → message at the sink p50 ${ms(singleP50)}   p99 ${ms(percentile(singleSorted, 99))}   max ${ms(singleSorted[singleSorted.length - 1] ?? NaN)}` +
      `; the API answered in p50 ${ms(percentile(singleApi, 50))}${lostSingles ? `; ${lostSingles} never arrived within 30 s` : ''}`,
    serviceCpuS === undefined
      ? `  cpu           this process (load generator, API, worker, sink) used ${cpuS.toFixed(1)} CPU-s from the first request to the last delivery: ${perEmail(cpuS)} ms per email`
      : `  cpu           the service process used ${serviceCpuS.toFixed(1)} CPU-s from the first request to the last delivery: ${perEmail(serviceCpuS)} ms per email; ` +
        `this one (load generator, sink) ${perEmail(cpuS)} ms per email`,
    `                PostgreSQL backends of ${stack.db.name} ${perEmail(postgresCpuS)} ms, Temporal server ${perEmail(temporalCpuS)} ms per email; all together ${perEmail(totalCpuS)} ms per email, ` +
      `${(perEmailMs(totalCpuS) / rawCpuMs).toFixed(2)} × the raw pool's CPU per message (a machine's drift moves both alike, so this compares runs better than the rates do)`,
    ...(mainThreadBefore && mainThreadAfter
      ? [
          `  event loop    the service's main thread was on a core ${((100 * (mainThreadAfter.cpuSeconds - mainThreadBefore.cpuSeconds)) / acceptedS).toFixed(0)} % of the load (until the last 200) ` +
            `and was preempted ${((mainThreadAfter.preemptions - mainThreadBefore.preemptions) / acceptedS).toFixed(0)} times a second; the rest of the time it waited (PostgreSQL, the relay) or stood ready for a core`,
        ]
      : []),
    `  errors        ${errors}${tally.errorDetail()}${single.errorDetail()}`,
    `  exactly once  ${exactlyOnce ? 'OK' : 'FAILED'}: ${once}/${total} email ids at the sink exactly once by Message-ID (${opts.n} of the load, ${opts.oneAtATime} one at a time); ` +
      `${duplicated} duplicated (${extraCopies} extra copies), ${missing} missing, ${unexpected} unexpected messages`,
    `  check         ${checkOk ? 'OK' : 'FAILED'}: exactly once ${exactlyOnce ? 'yes' : 'no'}, ${unsigned} not signed for ${DOMAIN}, ${atSink}/${total} messages at the sink; ${sent}/${total} emails rows SENT (${[...rows].map(([k, v]) => `${k} ${v}`).join(', ')})`,
    `  goals         (for 1 recipient per request and 16 clients, 2 cores)`,
    ...goalLines([
      { goal: '≥ 1,000 accepted/s', met: acceptedRate >= 1000, measured: `${acceptedRate.toFixed(0)}/s (${(acceptedRate / 1000).toFixed(2)} of it)` },
      { goal: 'p99 < 100 ms', met: p99 < 100, measured: ms(p99) },
      { goal: 'delivered ≥ 0.6 × raw', met: deliveredRate >= 0.6 * raw, measured: `${(deliveredRate / raw).toFixed(3)} × raw` },
      { goal: 'every email exactly once', met: exactlyOnce, measured: `${duplicated} duplicated, ${missing} missing` },
      { goal: 'one at a time p50 < 300 ms', met: singleP50 < 300, measured: ms(singleP50) },
    ]),
    '',
  ];
  process.stdout.write(lines.join('\n'));
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
