/**
 * Transactional send benchmark: N emails through POST /v1/send with concurrent keep-alive clients,
 * from the API to the SMTP relay, DKIM-signed, against a raw nodemailer pool to the same relay
 * measured in the same run.
 *
 *   npx tsx bench/send.ts [--n 2000] [--concurrency 16] [--recipients-per-request 1] [--raw 2000] [--one-at-a-time 50]
 *                         [--topology start|split] [--service in-process] [--payload persistent|transient] [--cold]
 *                         [--progress-seconds 5] [--warm-up 12000]
 *
 * It sets everything up on loopback itself (bench/harness.ts startStack + verifiedDomain) and
 * tears it down again: a fresh database (dropped at the end), an in-memory Temporal dev server, the
 * test DNS server and SMTP sink (the relay every email goes to), the service, and a project with a
 * domain whose DKIM/SPF/DMARC records are published and verified, so every email is signed.
 *
 * Where the service runs (--topology, bench/harness.ts Topology): `start` (default) is
 * `tidings start`, which runs the API and the worker as two processes under its supervision; `split`
 * is `tidings start --api` and `tidings start --worker` started apart, as production runs them. Both run the build
 * (BENCH_SERVICE_FROM_SOURCE=1: the source through tsx). This process keeps the load generator and
 * the sink, so CPU per email is the service's alone (all of its processes'). `--service
 * in-process` puts the API and the worker in this process instead, to profile one process
 * (`--service process` is another name for start). PostgreSQL and Temporal share the machine
 * with all of it. BENCH_SERVICE_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" profiles the service.
 *
 * What each request carries (--payload), one new contact per recipient, rendered per contact:
 *  - persistent (default): `data: {name, plan, company}`, plain values /v1/send stores on the
 *    contact, and the subject and body render from them ("Your {{plan}} plan, {{name}}"): the
 *    common case of an app that keeps its users' fields on the contact;
 *  - transient: a one-shot order number (`{value, persistent: false}`), used for this render and
 *    not stored; the contact keeps only its name.
 *
 * Phases, one after the other:
 *  0. raw: --raw messages like the API's (same template and data, rendered and DKIM-signed with
 *     the domain's key) through a fresh nodemailer pool straight to the sink, --concurrency in
 *     flight (bench/baselines.ts rawPoolRate), after as many unmeasured (warmRawPool);
 *  1. a warm-up: --warm-up sends (12,000) of the same payload to other recipients, then ANALYZE,
 *     outside every figure and check: enough that V8 has optimized the request path before the
 *     load (JIT_WARM_UP_REQUESTS), and statistics as autovacuum would have them. `--cold` empties
 *     the tables the warm-up wrote into instead, and leaves them without statistics: the load
 *     meets a new install's database (its first requests plan on no statistics) with warm code,
 *     to show a new install is not a slow one. The load follows at once: a service left idle for
 *     a few seconds has V8 drop code it compiled, and compiles it again under the load;
 *  2. the load: N emails through /v1/send, then until every accepted email is at the sink.
 *     "Accepted" is the rate the API answers 200; "delivered" the rate mail reaches the sink,
 *     first request to last message, whatever happens in between;
 *  3. one at a time: --one-at-a-time single sends on the now idle service, each after the last one
 *     arrived and a pause, timed from the request to the message's arrival at the sink;
 *  4. raw again; the mean of the two raw runs is the reference "delivered / raw" is taken against.
 * Checks: every email id the API answered reaches the sink exactly once (by Message-ID, whose local
 * part is the email id), signed for the domain, with the subject rendered from its contact's data,
 * and ends SENT in the emails table; the contacts keep the persistent data and none of the
 * transient. The report ends with the goals (docs/performance.md) and a RESULT line for
 * bench/goals.ts; the exit code is 1 when a check failed.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import type { SmtpMessage } from '../test/helpers/smtp';
import { rawPoolRate, warmRawPool, type RawFigures, type RawMessageSpec } from './baselines';
import {
  BENCH_RATE_LIMIT,
  cpuSnapshot,
  cpuUsedBetween,
  describeServiceCpu,
  headersOf,
  JIT_WARM_UP_REQUESTS,
  mainThreadOf,
  runBench,
  serviceCpuSeconds,
  serviceSetup,
  type Interruption,
  type Stack,
  startStack,
  Teardown,
  topologyOption,
  verifiedDomain,
  warmthLine,
  warmUp,
} from './harness';
import { closedLoop, environmentLine, goalLines, log, percentile, positiveInt, printResult, RequestTally } from './support';

const LOG_LEVEL = 'warn';
const DOMAIN = 'bench-send.test';
const FROM = { name: 'Bench', email: `orders@${DOMAIN}` };
/** The warm-up's recipients, whose emails the checks leave out. */
const WARMUP_PREFIX = 'warmup';
/** Between two one-at-a-time sends: the last one's bookkeeping (its SENT mark) is done by then. */
const ONE_AT_A_TIME_PAUSE_MS = 100;
const PLANS = ['free', 'starter', 'pro', 'enterprise'];

type PayloadName = 'persistent' | 'transient';
/**
 * What a request carries besides its recipients, from its seed (a number of its own: the load's
 * request i is 100,000 + i, the single sends 200,000 + k, the warm-up 300,000 + i).
 */
interface Payload {
  subject: string;
  body: string;
  /** The request's `data`. */
  data(seed: number, name: string): Record<string, unknown>;
  /** The contact's stored data and the one-shot variables, as /v1/send leaves them (for the raw pool). */
  contact(seed: number, name: string): { data: Record<string, string>; extra: Record<string, string> };
  /** The subject recipient `name` of request `seed` gets. */
  renderedSubject(seed: number, name: string): string;
}
const PAYLOADS: Record<PayloadName, Payload> = {
  persistent: {
    subject: 'Your {{plan}} plan, {{name}}',
    body: '<p>Hi {{name}},</p><p>{{company}} is now on the {{plan}} plan. Thank you for choosing us.</p>',
    data: (seed, name) => ({ name, plan: PLANS[seed % PLANS.length], company: `Company ${seed}` }),
    contact: (seed, name) => ({ data: { name, plan: PLANS[seed % PLANS.length]!, company: `Company ${seed}` }, extra: {} }),
    renderedSubject: (seed, name) => `Your ${PLANS[seed % PLANS.length]} plan, ${name}`,
  },
  transient: {
    subject: 'Your order {{order}} has shipped',
    body: '<p>Hi {{name ?? "there"}},</p><p>order {{order}} is on its way.</p>',
    data: (seed) => ({ order: { value: `#${seed}`, persistent: false } }),
    contact: (seed, name) => ({ data: { name }, extra: { order: `#${seed}` } }),
    renderedSubject: (seed) => `Your order #${seed} has shipped`,
  },
};
const LOAD_SEED = 100_000;
const SINGLE_SEED = 200_000;
const WARMUP_SEED = 300_000;

/** The raw reference's messages: what /v1/send renders for the load's recipient i (one per request). */
const rawMessage = (payload: Payload): RawMessageSpec => ({
  subject: payload.subject,
  body: payload.body,
  fromEmail: FROM.email,
  fromName: FROM.name,
  marketing: false,
  tracking: false,
  recipient: (i) => ({ name: `User ${i}`, ...payload.contact(LOAD_SEED + i, `User ${i}`) }),
});

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
      topology: { type: 'string' },
      service: { type: 'string' },
      payload: { type: 'string', default: 'persistent' },
      cold: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      'Usage: npx tsx bench/send.ts [--n 2000] [--concurrency 16] [--recipients-per-request 1] [--raw 2000] [--one-at-a-time 50]\n' +
        '                            [--topology start|split] [--service in-process] [--payload persistent|transient] [--cold] [--progress-seconds 5] [--warm-up 12000]\n',
    );
    process.exit(0);
  }
  if (values.payload !== 'persistent' && values.payload !== 'transient') throw new Error(`--payload must be persistent or transient, not ${values.payload}`);
  return {
    n: positiveInt('n', values.n),
    concurrency: positiveInt('concurrency', values.concurrency),
    perRequest: positiveInt('recipients-per-request', values['recipients-per-request']),
    raw: positiveInt('raw', values.raw),
    oneAtATime: values['one-at-a-time'] === '0' ? 0 : positiveInt('one-at-a-time', values['one-at-a-time']),
    progressSeconds: positiveInt('progress-seconds', values['progress-seconds']),
    warmUp: positiveInt('warm-up', values['warm-up']),
    topology: topologyOption(values, 'start'),
    payloadName: values.payload as PayloadName,
    payload: PAYLOADS[values.payload as PayloadName],
    cold: values.cold,
  };
}

/** A send of request `seed` to these recipients (each a new contact); `expect` learns the subject each recipient should get. */
function sendBody(payload: Payload, to: { name: string; email: string }[], seed: number, expect?: Map<string, string>) {
  if (expect) for (const r of to) expect.set(r.email, payload.renderedSubject(seed, r.name));
  return {
    to: to.length === 1 ? to[0] : to,
    from: FROM,
    subject: payload.subject,
    body: payload.body,
    // A request's recipients share its data; each one's name comes from `to` (db/messages/send.ts recipientData).
    data: payload.data(seed, to[0]!.name),
  };
}

/** Request i of the load carries emails i*per … (i+1)*per-1 (the last one fewer). */
function loadBody(payload: Payload, i: number, n: number, perRequest: number, expect: Map<string, string>) {
  const to = [];
  for (let k = i * perRequest; k < Math.min(n, (i + 1) * perRequest); k++) to.push({ name: `User ${k}`, email: `user${k}@bench.example.org` });
  return sendBody(payload, to, LOAD_SEED + i, expect);
}

/** The Subject header of a raw message (short, unfolded and ASCII here). */
function subjectOf(raw: Buffer): string | undefined {
  const head = raw.subarray(0, Math.max(0, raw.indexOf('\r\n\r\n'))).toString('latin1');
  return /^subject: ?([^\r\n]*)/im.exec(head)?.[1];
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
  const { payload } = opts;
  const stack = await startStack({ teardown, checkpoint: stop.checkpoint, concurrency: opts.concurrency, logLevel: LOG_LEVEL, topology: opts.topology });
  const { db, sink, orm, client } = stack;
  const domainId = await verifiedDomain(stack, DOMAIN);
  stop.checkpoint();

  // ---- 0. The raw reference, before. Ahead of the warm-up, so that the service goes from its
  // warm-up into the load without an idle pause, in which V8 would drop code it had compiled.
  const rawSpec = rawMessage(payload);
  await warmRawPool(stack, domainId, rawSpec, opts.raw, opts.concurrency);
  const rawBefore = await rawPoolRate(stack, domainId, rawSpec, opts.raw, opts.concurrency);
  log(`raw nodemailer pool → sink: ${rawBefore.rate.toFixed(0)} msg/s`);
  sink.clear();
  stop.checkpoint();

  // ---- 1. A warm-up (bench/harness.ts warmUp); its rows are left out below, or gone when --cold.
  await warmUp(
    stack,
    stop,
    {
      n: opts.n,
      count: opts.warmUp,
      concurrency: opts.concurrency,
      tables: 'contacts, emails',
      what: 'sends',
      cold: opts.cold,
      // Every warm-up email at the sink and marked SENT: nothing of it is still moving when the load starts.
      settle: async (count) => {
        await sink.waitFor(count, 60_000).catch(() => undefined);
        for (const deadline = Date.now() + 30_000; !stop.interrupted && Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
          const [left] = await orm.em.fork().getConnection().execute<{ n: number }[]>(`select count(*)::int as n from emails where status <> 'SENT'`);
          if (left!.n === 0) break;
        }
      },
    },
    (i) => client.request('POST', '/v1/send', sendBody(payload, [{ name: `Warm-up ${i}`, email: `${WARMUP_PREFIX}${i}@bench.example.org` }], WARMUP_SEED + i)),
  );
  sink.clear();
  stop.checkpoint();

  log(`domain ${DOMAIN} verified; sending ${opts.n} emails in ${requests} requests with ${opts.concurrency} clients`);

  // ---- 2. The load. Latencies are per request; every email id the API returns is expected at the sink ----
  const tally = new RequestTally(requests);
  const expected = new Set<string>();
  /** Recipient → the subject its contact's data renders. */
  const subjects = new Map<string, string>();
  let lastOk = 0;
  const loadBefore = os.loadavg()[0]!;
  const cpuBefore = process.cpuUsage();
  const serviceCpuBefore = serviceCpuSeconds(stack);
  const mainThreadBefore = stack.apiPid ? mainThreadOf(stack.apiPid) : undefined;
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
    const res = await tally.request(() => client.request('POST', '/v1/send', loadBody(payload, i, opts.n, opts.perRequest, subjects)));
    if (res) {
      lastOk = performance.now();
      for (const e of (res.body as SendAnswer).data.emails) expected.add(e.email);
      accepted = expected.size;
    }
  });
  const acceptedS = (lastOk - start) / 1000;
  const loadAccepted = expected.size;
  // The event loop answers every request: is it on a core all the load long, or waiting for one?
  const mainThreadAfter = stack.apiPid ? mainThreadOf(stack.apiPid) : undefined;
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
  const serviceCpu = cpuUsedBetween(serviceCpuBefore, serviceCpuSeconds(stack));
  const serviceCpuS = serviceCpu?.total;
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
    const res = await single.request(() => client.request('POST', '/v1/send', sendBody(payload, [{ name: `Single ${k}`, email: `single${k}@bench.example.org` }], SINGLE_SEED + k, subjects)));
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
  let misrendered = 0;
  for (const m of sink.messages) {
    const id = emailIdOf(m);
    if (id) seen.set(id, (seen.get(id) ?? 0) + 1);
    else withoutId++;
    if (headersOf(m.raw).dkimDomain !== DOMAIN) unsigned++;
    const subject = subjects.get(m.envelope.to[0] ?? '');
    if (subject === undefined || subjectOf(m.raw) !== subject) misrendered++;
  }
  // What the contacts kept: the persistent payload's fields, and never the transient one's.
  const stored = (
    await orm.em.fork().getConnection().execute<{ contacts: number; persistent: number; transient: number }[]>(
      `select count(*)::int as contacts, count(*) filter (where data ? 'plan' and data ? 'company')::int as persistent, count(*) filter (where data ? 'order')::int as transient
       from contacts where email not like '${WARMUP_PREFIX}%'`,
    )
  )[0]!;
  const storedOk = stored.transient === 0 && stored.persistent === (opts.payloadName === 'persistent' ? stored.contacts : 0);
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
  const checkOk =
    !stop.interrupted && errors === 0 && exactlyOnce && unsigned === 0 && misrendered === 0 && storedOk && atSink === total && sent === total && totalRows === total;

  // ---- 4. The raw reference, after (it empties the sink: the checks above are done) ----
  const rawAfter: RawFigures = stop.interrupted ? rawBefore : await rawPoolRate(stack, domainId, rawSpec, opts.raw, opts.concurrency);
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
    `  setup         topology ${stack.topology}: ${serviceSetup(stack)}; this process runs the load generator, the DNS server and the SMTP sink;`,
    `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
    warmthLine(opts.cold, `${opts.warmUp} sends of the same payload to other recipients`),
    `  rate limit    RATE_LIMIT_PER_MINUTE raised to ${BENCH_RATE_LIMIT} (default 1000): the limiter still counts every request but never throttles`,
    `  payload       ${opts.payloadName}: data ${JSON.stringify(payload.data(LOAD_SEED, 'User 0'))}` +
      (opts.payloadName === 'persistent' ? ' (stored on the contact, the template renders from it)' : ' (one-shot, not stored; the contact keeps its name)'),
    `  message       DKIM-signed (RSA-2048) HTML rendered per recipient from subject "${payload.subject}" and body "${payload.body}"`,
    `  raw pool      ${raw.toFixed(0)} msg/s: the same messages (rendered ahead, composed and signed on send) through a fresh nodemailer pool straight to the sink, ${opts.concurrency} in flight ` +
      `(${rawBefore.rate.toFixed(0)} before the load, ${rawAfter.rate.toFixed(0)} after; ${opts.raw} messages each; this process ${rawCpuMs.toFixed(2)} ms CPU per message, sink included)`,
    `  accepted      ${loadAccepted} emails in ${acceptedS.toFixed(2)} s: ${rate(loadAccepted, acceptedS)} emails/s, ${rate(tally.ok, acceptedS)} requests/s at the API (until the last 200)`,
    `  latency       p50 ${ms(percentile(sorted, 50))}   p95 ${ms(percentile(sorted, 95))}   p99 ${ms(p99)}   max ${ms(sorted[sorted.length - 1] ?? NaN)}`,
    `  delivered     ${arrived ? `${loadAccepted} emails in ${deliveredS.toFixed(2)} s: ${rate(loadAccepted, deliveredS)} emails/s at the sink (first request to last message)` : `only ${loadDelivered} of ${loadAccepted} arrived`}`,
    `  ratio         delivered / raw ${(deliveredRate / raw).toFixed(3)}; accepted / raw ${(acceptedRate / raw).toFixed(3)}`,
    `  one at a time ${toSink.length} single sends on the idle service, each after the last arrived and ${ONE_AT_A_TIME_PAUSE_MS} ms: request → message at the sink p50 ${ms(singleP50)}   p99 ${ms(percentile(singleSorted, 99))}   max ${ms(singleSorted[singleSorted.length - 1] ?? NaN)}` +
      `; the API answered in p50 ${ms(percentile(singleApi, 50))}${lostSingles ? `; ${lostSingles} never arrived within 30 s` : ''}`,
    serviceCpu === undefined
      ? `  cpu           this process (load generator, API, worker, sink) used ${cpuS.toFixed(1)} CPU-s from the first request to the last delivery: ${perEmail(cpuS)} ms per email`
      : `  cpu           from the first request to the last delivery: ${describeServiceCpu(serviceCpu)}, ${describeServiceCpu(serviceCpu, { count: opts.n, unit: 'email' })}; ` +
        `this one (load generator, sink) ${perEmail(cpuS)} ms per email`,
    `                PostgreSQL backends of ${stack.db.name} ${perEmail(postgresCpuS)} ms, Temporal server ${perEmail(temporalCpuS)} ms per email; all together ${perEmail(totalCpuS)} ms per email, ` +
      `${(perEmailMs(totalCpuS) / rawCpuMs).toFixed(2)} × the raw pool's CPU per message (a machine's drift moves both alike, so this compares runs better than the rates do)`,
    ...(serviceCpuS === undefined
      ? []
      : [
          `                the service and PostgreSQL ${((serviceCpuS + postgresCpuS) / cpuS).toFixed(2)} × this process's CPU over the same window: the steadiest yardstick for comparing code, ` +
            `as the host's speed moves both alike while the raw pool runs at other times`,
        ]),
    ...(mainThreadBefore && mainThreadAfter
      ? [
          `  event loop    the API process's main thread was on a core ${((100 * (mainThreadAfter.cpuSeconds - mainThreadBefore.cpuSeconds)) / acceptedS).toFixed(0)} % of the load (until the last 200) ` +
            `and was preempted ${((mainThreadAfter.preemptions - mainThreadBefore.preemptions) / acceptedS).toFixed(0)} times a second; the rest of the time it waited (PostgreSQL, the relay) or stood ready for a core`,
        ]
      : []),
    `  errors        ${errors}${tally.errorDetail()}${single.errorDetail()}`,
    `  exactly once  ${exactlyOnce ? 'OK' : 'FAILED'}: ${once}/${total} email ids at the sink exactly once by Message-ID (${opts.n} of the load, ${opts.oneAtATime} one at a time); ` +
      `${duplicated} duplicated (${extraCopies} extra copies), ${missing} missing, ${unexpected} unexpected messages`,
    `  check         ${checkOk ? 'OK' : 'FAILED'}: exactly once ${exactlyOnce ? 'yes' : 'no'}, ${unsigned} not signed for ${DOMAIN}, ${misrendered} without the subject their contact's data renders, ${atSink}/${total} messages at the sink; ` +
      `${sent}/${total} emails rows SENT (${[...rows].map(([k, v]) => `${k} ${v}`).join(', ')}); ` +
      `contacts with plan and company stored ${stored.persistent}/${stored.contacts}, with the order stored ${stored.transient}${storedOk ? '' : ' (wrong for this payload)'}`,
    `  goals         (for 1 recipient per request and 16 clients, 2 cores${opts.cold ? '; set for a warm database: bench/goals.ts compares a cold run with a warm one' : ''})`,
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
  printResult({
    bench: 'send',
    topology: stack.topology,
    payload: opts.payloadName,
    cold: opts.cold,
    n: opts.n,
    concurrency: opts.concurrency,
    recipientsPerRequest: opts.perRequest,
    acceptedPerS: acceptedRate,
    p50Ms: percentile(sorted, 50),
    p99Ms: p99,
    deliveredPerS: deliveredRate,
    rawPerS: raw,
    deliveredOverRaw: deliveredRate / raw,
    acceptedOverRaw: acceptedRate / raw,
    oneAtATimeP50Ms: singleP50,
    serviceCpuMsPerEmail: serviceCpuS === undefined ? null : perEmailMs(serviceCpuS),
    totalCpuOverRaw: perEmailMs(totalCpuS) / rawCpuMs,
    serviceAndPostgresOverBench: serviceCpuS === undefined ? null : (serviceCpuS + postgresCpuS) / cpuS,
    exactlyOnce,
    checkOk,
    interrupted: stop.interrupted,
  });
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
