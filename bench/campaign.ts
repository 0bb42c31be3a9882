/**
 * Campaign benchmark: one campaign to N contacts (default 100,000), from POST /campaigns/:id/send to
 * the last message at a local SMTP sink, against the sink's raw acceptance rate measured in the
 * same run.
 *
 *   npx tsx bench/campaign.ts [--n 100000] [--raw 5000] [--throttle 1000000000] [--service in-process|process] [--topology start|split]
 *
 * Set-up (bench/harness.ts, as bench/send.ts): a fresh database, an in-memory Temporal dev server,
 * the test DNS server and SMTP sink, the API and a worker in this process (default worker options,
 * default campaign tuning: batches of 5,000, 32 emails in flight), a project with a verified domain so
 * every email is DKIM-signed. N contacts are inserted set-based (not through the API).
 *
 * "raw" is a nodemailer pool (bench/baselines.ts rawPoolRate: mail/transport.ts createSmtpMailer,
 * the worker's own pool settings) sending straight to the same sink, as many messages in flight, each
 * message like a campaign email: the same template rendered for a contact (with its tracking pixel
 * and List-Unsubscribe headers), composed and DKIM-signed with the same cached key. It runs before and after the campaign; the
 * mean of the two is the reference. "end to end" is N / (last message at the sink − the send
 * request): it includes the audience snapshot, every batch's rendering, the email rows, the SENT
 * marks and the Temporal round trips. SEND_THROTTLE_PER_SECOND is raised (--throttle) so the
 * per-project throttle, still consulted for every chunk, does not limit the figure.
 *
 * With `--service in-process` (the default) the sink, the API and the worker share one Node process;
 * with `--service process` (or `--topology start`) the service runs as `npm start` runs it
 * (`tidings start`, the API and the worker under a supervisor), with `--topology split` as `tidings start --api` and
 * `--worker` (bench/harness.ts Topology), so the sink, as a relay would, runs beside the worker
 * instead of on its event loop, and the node CPU is given for each process. Either way all of it
 * shares the machine with PostgreSQL and Temporal: the ratio says what the platform costs on top
 * of SMTP here.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { newId } from '../db/ids';
import { query, queryOne } from '../db/sql';
import { DEFAULT_CAMPAIGN_TUNING } from '../temporal/campaigns/workflow';
import { rawPoolRate, warmRawPool, type RawMessageSpec } from './baselines';
import {
  cpuSnapshot,
  cpuUsedBetween,
  describeServiceCpu,
  headersOf,
  runBench,
  serviceCpuSeconds,
  serviceSetup,
  type Interruption,
  type Stack,
  startStack,
  Teardown,
  topologyOption,
  verifiedDomain,
} from './harness';
import { environmentLine, log, positiveInt } from './support';

const DOMAIN = 'bench-campaign.test';
const SUBJECT = 'News for {{first ?? "you"}}';
const BODY =
  '<html><body><h1>Hello {{first ?? "there"}}</h1><p>Our autumn update, number {{n}}.</p>' +
  '<p><a href="https://example.org/read?id={{n}}">Read more</a></p><p><a href="{{unsubscribeUrl}}">Unsubscribe</a></p></body></html>';

function options() {
  const { values } = parseArgs({
    options: {
      n: { type: 'string', default: '100000' },
      raw: { type: 'string', default: '5000' },
      throttle: { type: 'string', default: '1000000000' },
      service: { type: 'string' },
      topology: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/campaign.ts [--n 100000] [--raw 5000] [--throttle 1000000000] [--service in-process|process] [--topology start|split]\n');
    process.exit(0);
  }
  return {
    n: positiveInt('n', values.n),
    raw: positiveInt('raw', values.raw),
    throttle: positiveInt('throttle', values.throttle),
    topology: topologyOption(values, 'in-process'),
  };
}

/** N contacts, 10,000 per statement: `user<i>@bench.example.org`, subscribed, with two data fields. */
async function seedContacts(stack: Stack, n: number): Promise<void> {
  const em = stack.orm.em.fork();
  for (let from = 0; from < n; from += 10_000) {
    const rows = [];
    for (let i = from; i < Math.min(n, from + 10_000); i++) {
      rows.push({ id: newId('cnt'), email: `user${i}@bench.example.org`, data: { first: `User${i}`, n: i } });
    }
    await query(
      em,
      `insert into contacts (id, project_id, email, subscribed, data)
       select id, ?, email, true, data from jsonb_to_recordset(?::jsonb) as r(id text, email text, data jsonb)`,
      [stack.project.id, JSON.stringify(rows)],
    );
  }
}

/** The raw reference's messages: the campaign's template for contacts like the seeded ones. */
const RAW_MESSAGE: RawMessageSpec = {
  subject: SUBJECT,
  body: BODY,
  fromEmail: `news@${DOMAIN}`,
  fromName: 'Bench News',
  marketing: true,
  tracking: true,
  recipient: (i) => ({ name: null, data: { first: `User${i}`, n: i }, extra: {} }),
};

async function main(teardown: Teardown, signals: Interruption): Promise<void> {
  const opts = options();
  const stack = await startStack({
    teardown,
    checkpoint: signals.checkpoint,
    concurrency: 4,
    env: { SEND_THROTTLE_PER_SECOND: String(opts.throttle) },
    topology: opts.topology,
  });
  const domainId = await verifiedDomain(stack, DOMAIN);
  signals.checkpoint();
  let t = performance.now();
  await seedContacts(stack, opts.n);
  log(`${opts.n} contacts inserted in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  signals.checkpoint();

  const inFlight = DEFAULT_CAMPAIGN_TUNING.concurrency;
  await warmRawPool(stack, domainId, RAW_MESSAGE, opts.raw, inFlight);
  const rawBefore = await rawPoolRate(stack, domainId, RAW_MESSAGE, opts.raw, inFlight);
  log(`raw nodemailer pool → sink: ${rawBefore.rate.toFixed(0)} msg/s`);
  signals.checkpoint();

  const created = await stack.client.request('POST', '/campaigns', {
    name: 'Bench',
    subject: SUBJECT,
    body: BODY,
    from: `news@${DOMAIN}`,
    fromName: 'Bench News',
  });
  if (created.status !== 201) throw new Error(`POST /campaigns: ${created.status} ${created.text}`);
  const campaignId = (created.body as { id: string }).id;

  const loadBefore = os.loadavg()[0]!;
  const cpuBefore = cpuSnapshot(stack);
  const serviceCpuBefore = serviceCpuSeconds(stack);
  const wallStart = Date.now();
  t = performance.now();
  const sent = await stack.client.request('POST', `/campaigns/${campaignId}/send`, {});
  if (sent.status !== 200) throw new Error(`POST /campaigns/:id/send: ${sent.status} ${sent.text}`);
  const acceptMs = performance.now() - t;

  let last = { at: Date.now(), count: 0 };
  const progress = setInterval(() => {
    const count = stack.sink.messages.length;
    log(`${((Date.now() - wallStart) / 1000).toFixed(0)} s: ${count} delivered (+${((count - last.count) / ((Date.now() - last.at) / 1000)).toFixed(0)}/s)`);
    last = { at: Date.now(), count };
  }, 5_000);
  teardown.add(async () => clearInterval(progress));
  let lastCount = -1;
  let lastProgress = Date.now();
  while (!signals.interrupted && stack.sink.messages.length < opts.n && Date.now() - lastProgress < 60_000) {
    if (stack.sink.messages.length !== lastCount) [lastCount, lastProgress] = [stack.sink.messages.length, Date.now()];
    await new Promise((r) => setTimeout(r, 50));
  }
  clearInterval(progress);
  const messages = stack.sink.messages;
  const lastAt = messages.length ? Math.max(...messages.slice(-1000).map((m) => m.receivedAt.getTime())) : NaN;
  const firstAt = messages.length ? messages[0]!.receivedAt.getTime() : NaN;
  const cpuAfter = cpuSnapshot(stack);
  const serviceCpu = cpuUsedBetween(serviceCpuBefore, serviceCpuSeconds(stack));
  const serviceCpuS = serviceCpu?.total;
  const loadAfter = os.loadavg()[0]!;

  // The campaign's own end: SENT once its last mark is written.
  const status = async () =>
    (await queryOne<{ status: string; total: number; snapshot_ms: number | null }>(
      stack.orm.em.fork(),
      `select status, total_recipients as total,
         extract(epoch from (snapshot_at - ?::timestamptz)) * 1000 as snapshot_ms
       from campaigns where id = ?`,
      [new Date(wallStart).toISOString(), campaignId],
    ))!;
  let c = await status();
  for (const deadline = Date.now() + 30_000; !signals.interrupted && c.status !== 'SENT' && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 200));
    c = await status();
  }

  // Checks: every contact exactly once (by recipient and by Message-ID), signed; rows agree.
  const perRecipient = new Map<string, number>();
  const ids = new Set<string>();
  let unsigned = 0;
  for (const m of messages) {
    const to = m.envelope.to[0] ?? '';
    perRecipient.set(to, (perRecipient.get(to) ?? 0) + 1);
    const h = headersOf(m.raw);
    if (h.messageId) ids.add(h.messageId);
    if (h.dkimDomain !== DOMAIN) unsigned++;
  }
  const duplicated = [...perRecipient.values()].filter((v) => v > 1).length;
  const rows = await query<{ status: string; n: string }>(
    stack.orm.em.fork(),
    'select status, count(*) as n from emails where campaign_id = ? group by status',
    [campaignId],
  );
  const sentRows = Number(rows.find((r) => r.status === 'SENT')?.n ?? 0);
  const checkOk =
    !signals.interrupted && perRecipient.size === opts.n && duplicated === 0 && ids.size === opts.n && unsigned === 0 &&
    messages.length === opts.n && sentRows === opts.n && c.status === 'SENT' && c.total === opts.n;

  stack.sink.clear();
  const rawAfter = signals.interrupted ? rawBefore : await rawPoolRate(stack, domainId, RAW_MESSAGE, opts.raw, inFlight);
  const raw = (rawBefore.rate + rawAfter.rate) / 2;
  const rawCpuMs = (rawBefore.cpuMs + rawAfter.cpuMs) / 2;

  const e2eSeconds = (lastAt - wallStart) / 1000;
  const e2e = opts.n / e2eSeconds;
  const steady = (opts.n - 1) / ((lastAt - firstAt) / 1000);
  const cpuS = { node: cpuAfter.node - cpuBefore.node + (serviceCpuS ?? 0), temporal: cpuAfter.temporal - cpuBefore.temporal, postgres: cpuAfter.postgres - cpuBefore.postgres };
  const cpu = (k: keyof typeof cpuS) => cpuS[k].toFixed(1);
  const perEmail = (k: keyof typeof cpuS) => ((cpuS[k] * 1000) / opts.n).toFixed(2);
  const nodeSplit =
    serviceCpu === undefined
      ? ''
      : ` (${describeServiceCpu(serviceCpu)}, ${describeServiceCpu(serviceCpu, { count: opts.n, unit: 'email' })}; this process, the sink, ${(cpuS.node - serviceCpu.total).toFixed(1)} s)`;
  const lines = [
    '',
    `Tidings campaign bench: one campaign to N=${opts.n} contacts, API → Temporal → worker → SMTP sink`,
    `  environment   ${environmentLine(stack.db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after (1-minute; other work on the machine skews the figures)`,
    `  setup         topology ${stack.topology}: ${serviceSetup(stack)}; this process runs the DNS server and the SMTP sink;`,
    `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
    `  campaign      batches of ${stack.config.campaignBatchSize}, ${inFlight} emails in flight, SEND_THROTTLE_PER_SECOND=${opts.throttle} (consulted, not limiting)`,
    `  message       MARKETING: DKIM-signed (RSA-2048) HTML rendered per contact, click-tracked link and open pixel, List-Unsubscribe`,
    `  send request  answered in ${acceptMs.toFixed(0)} ms (status SENDING); audience snapshot done ${c.snapshot_ms === null ? '?' : `${(Number(c.snapshot_ms) / 1000).toFixed(2)} s`} after it`,
    `  end to end    ${opts.n} emails in ${e2eSeconds.toFixed(2)} s: ${e2e.toFixed(0)} emails/s (send request → last message at the sink)`,
    `  steady        ${steady.toFixed(0)} emails/s (first → last message at the sink)`,
    `  raw           ${raw.toFixed(0)} msg/s: nodemailer pool straight to the sink, ${inFlight} in flight (${rawBefore.rate.toFixed(0)} before, ${rawAfter.rate.toFixed(0)} after; ${opts.raw} messages each)`,
    `  ratio         ${(e2e / raw).toFixed(2)} end to end / raw (${(steady / raw).toFixed(2)} steady / raw)`,
    `  cpu           during the campaign: node ${cpu('node')} s${nodeSplit}, temporal ${cpu('temporal')} s, postgres ${cpu('postgres')} s (the server's, other databases' work included)`,
    `  cpu per email campaign: node ${perEmail('node')} ms + postgres ${perEmail('postgres')} ms + temporal ${perEmail('temporal')} ms; raw: node ${rawCpuMs.toFixed(2)} ms (sink included in both)`,
    `  check         ${checkOk ? 'OK' : 'FAILED'}: ${perRecipient.size}/${opts.n} recipients at the sink, ${duplicated} more than once, ${ids.size} distinct Message-IDs, ${unsigned} not signed for ${DOMAIN}; ${sentRows}/${opts.n} emails rows SENT (${rows.map((r) => `${r.status} ${r.n}`).join(', ')}); campaign ${c.status}, totalRecipients ${c.total}`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
