/**
 * Workflow (journey) benchmark: N `signup` events for N new contacts through POST /v1/track with
 * concurrent keep-alive clients, each starting one execution of an enabled workflow of one of two
 * shapes (--shape):
 *
 *   send-delay-send (default)  trigger(signup) → SEND_EMAIL (welcome) → DELAY 1 minute → SEND_EMAIL (follow-up)
 *   send-only                  trigger(signup) → SEND_EMAIL (welcome)
 *
 * with JOURNEY_TIME_SCALE shrinking the minute (default 0.001: 60 ms), so 2N (send-only: N) emails
 * reach the sink. bench/track.ts measures /v1/track with no workflow listening.
 *
 *   npx tsx bench/workflows.ts [--shape send-delay-send|send-only] [--n 500] [--concurrency 16] [--time-scale 0.001]
 *                              [--histories 100] [--topology start|split] [--service in-process] [--cold] [--warm-up 12000]
 *                              [--worker-options '{"maxConcurrentWorkflowTaskPolls":40}']
 *
 * It sets everything up on loopback itself and tears it down again (bench/harness.ts): a fresh,
 * migrated database (dropped at the end), an in-memory Temporal dev server, the test DNS server and
 * SMTP sink, and the service (RATE_LIMIT_PER_MINUTE raised); then a project, a verified domain
 * (every email DKIM-signed), two templates and the workflow, all through the HTTP API.
 *
 * --topology as in bench/send.ts: `start` (default), `tidings start` (API and worker under its
 * supervision); `split`, `tidings start --api` and `tidings start --worker` started apart; the
 * journeys run by the worker process either way; the service's CPU (all of its processes') is
 * reported apart from this process's.
 * `--service in-process` puts the API and a real worker in this process, for profiling and for
 * --worker-options (Worker.create options on top of what temporal/worker.ts passes, experiments
 * only); the load generator's requests then take event-loop time from the API, and the ORM's
 * connection pool is sampled.
 *
 * Payload: as bench/track.ts, `data: {plan}` stored on the contact (persistent), which the
 * templates render from ("Welcome to the {{plan ?? "free"}} plan").
 *
 * First a warm-up: --warm-up tracks (12,000, as bench/track.ts and bench/send.ts: enough for V8 to
 * have optimized the request path) before the workflow is enabled, and an ANALYZE; `--cold`
 * empties the tables it wrote into instead, a new install's database with warm code
 * (bench/harness.ts warmUp). After the load, once every
 * execution has ended, the same-run reference (bench/baselines.ts bareWorkflowRate): N executions
 * of a bare workflow with one no-op activity (bench/baseline-workflow.ts), started with the same
 * concurrency on a task queue of its own, served by a worker of its own (with the same
 * --worker-options) in this process, against the same dev server: started/s and completed/s (to
 * the last close time). The journeys' completed/s is then given as a ratio to it. It comes after
 * the load because its worker leaves this process changed: run before, the load generator answered
 * about a third fewer tracks/s, with the service's worker paused as without.
 *
 * Figures: tracks/s and latency at the API; executions started/s and completed/s from the
 * workflow_executions rows (started_at is written when the trigger dispatcher claims the entry,
 * finished_at by the execution's last activity), emails/s at the sink, every rate from the first
 * request. Then where the time goes: how long each step and the bookkeeping between steps take
 * (execution_steps), and, from the Temporal histories of a sample of executions, how many
 * activities and workflow tasks one execution needs and how long they queue and run; how busy the
 * ORM's connection pool was (in-process only); the CPU time of the service, this process, the
 * Temporal server and PostgreSQL (the bench database's backends; the whole server in brackets).
 * The goals (send-only) and a RESULT line for bench/goals.ts end the report; the exit code is 1
 * when a check failed.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import type { WorkerOptions } from '@temporalio/worker';
import { workflowIds } from '../temporal/ids';
import { bareWorkflowRate } from './baselines';
import {
  BENCH_RATE_LIMIT,
  cpuSnapshot,
  cpuUsedBetween,
  describeServiceCpu,
  JIT_WARM_UP_REQUESTS,
  headersOf,
  mainThreadOf,
  serviceCpuSeconds,
  serviceSetup,
  type Stack,
  startStack,
  Teardown,
  topologyOption,
  verifiedDomain,
  warmthLine,
  type Interruption,
  runBench,
  warmUp,
} from './harness';
import { closedLoop, environmentLine, goalLines, type JsonResponse, log, percentile, positiveInt, printResult, RequestTally } from './support';

const DOMAIN = 'bench-workflows.test';
const EVENT = 'signup';
const DELAY = { amount: 1, unit: 'minutes' } as const;
const DELAY_MS = 60_000;
const TEMPLATES = {
  welcome: { subject: 'Welcome to the {{plan ?? "free"}} plan', body: '<p>Hi {{email}},</p><p>thanks for signing up ({{plan}}).</p>' },
  followUp: { subject: 'How is it going, {{email}}?', body: '<p>One minute in: anything we can help with?</p>' },
};
const PLANS = ['free', 'starter', 'pro', 'enterprise'];
type StepSpec = { type: 'SEND_EMAIL'; template: keyof typeof TEMPLATES } | { type: 'DELAY' };
/** The journeys' graphs after the trigger, one step after the other. */
const SHAPES: Record<string, StepSpec[]> = {
  'send-delay-send': [{ type: 'SEND_EMAIL', template: 'welcome' }, { type: 'DELAY' }, { type: 'SEND_EMAIL', template: 'followUp' }],
  'send-only': [{ type: 'SEND_EMAIL', template: 'welcome' }],
};
const describeShape = (shape: StepSpec[]) =>
  [`trigger ${EVENT}`, ...shape.map((st) => (st.type === 'DELAY' ? `DELAY ${DELAY.amount} ${DELAY.unit}` : `SEND_EMAIL "${TEMPLATES[st.template].subject}"`))].join(' → ');
const TERMINAL = ['COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'];

function options() {
  const { values } = parseArgs({
    options: {
      shape: { type: 'string', default: 'send-delay-send' },
      n: { type: 'string', default: '500' },
      concurrency: { type: 'string', default: '16' },
      'time-scale': { type: 'string', default: '0.001' },
      histories: { type: 'string', default: '100' },
      topology: { type: 'string' },
      service: { type: 'string' },
      cold: { type: 'boolean', default: false },
      'worker-options': { type: 'string' },
      'warm-up': { type: 'string', default: String(JIT_WARM_UP_REQUESTS) },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      'Usage: npx tsx bench/workflows.ts [--shape send-delay-send|send-only] [--n 500] [--concurrency 16] [--time-scale 0.001] [--histories 100] [--topology start|split] [--service in-process] [--cold] [--worker-options JSON] [--warm-up 12000]\n',
    );
    process.exit(0);
  }
  const shape = SHAPES[values.shape];
  if (!shape) throw new Error(`--shape must be one of ${Object.keys(SHAPES).join(', ')}, got ${values.shape}`);
  const timeScale = Number(values['time-scale']);
  if (!(timeScale > 0 && timeScale <= 1)) throw new Error(`--time-scale must be in (0, 1], got ${values['time-scale']}`);
  const topology = topologyOption(values, 'start');
  const workerOptions = values['worker-options'] === undefined ? undefined : (JSON.parse(values['worker-options']) as Partial<WorkerOptions>);
  if (workerOptions && topology !== 'in-process') throw new Error('--worker-options applies to a worker in this process: give --service in-process');
  return {
    shapeName: values.shape,
    shape,
    topology,
    cold: values.cold,
    workerOptions,
    n: positiveInt('n', values.n),
    concurrency: positiveInt('concurrency', values.concurrency),
    timeScale,
    histories: positiveInt('histories', values.histories),
    warmUp: positiveInt('warm-up', values['warm-up']),
  };
}

async function expectStatus(res: Promise<JsonResponse>, status: number, what: string): Promise<{ id: string } & Record<string, unknown>> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 500)}`);
  return r.body as { id: string };
}

/** As test/helpers/journeys.ts buildJourney, over the bench's HTTP client: create, add the steps in a chain after the trigger, enable. */
async function buildJourney(client: Stack['client'], shape: StepSpec[], templateIds: Record<keyof typeof TEMPLATES, string>): Promise<string> {
  const created = await expectStatus(
    client.request('POST', '/workflows', { name: 'bench signup journey', eventName: EVENT, allowReentry: false }),
    201,
    'create workflow',
  );
  const id = created.id;
  const trigger = (created.steps as { id: string; type: string }[]).find((s) => s.type === 'TRIGGER')!.id;
  const step = async (type: string, config: Record<string, unknown>) =>
    (await expectStatus(client.request('POST', `/workflows/${id}/steps`, { type, config }), 201, `add ${type} step`)).id;
  let from = trigger;
  for (const st of shape) {
    const to = await step(st.type, st.type === 'DELAY' ? DELAY : { templateId: templateIds[st.template] });
    await expectStatus(client.request('POST', `/workflows/${id}/transitions`, { fromStepId: from, toStepId: to }), 201, 'add transition');
    from = to;
  }
  await expectStatus(client.request('PATCH', `/workflows/${id}`, { enabled: true }), 200, 'enable workflow');
  return id;
}

/** Ascending copy for percentile(). */
const sortedOf = (values: ArrayLike<number>) => Float64Array.from(values).sort();
const mean = (values: ArrayLike<number>) => {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  return values.length === 0 ? NaN : sum / values.length;
};
const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : 'n/a');
const secs = (v: number) => `${v.toFixed(2)} s`;
const perSec = (count: number, s: number) => (s > 0 ? (count / s).toFixed(1) : 'n/a');
const dist = (values: ArrayLike<number>) => {
  const s = sortedOf(values);
  return `p50 ${ms(percentile(s, 50))}  p95 ${ms(percentile(s, 95))}  p99 ${ms(percentile(s, 99))}  max ${ms(s[s.length - 1] ?? NaN)}`;
};

// ---- Temporal history analysis -------------------------------------------------------------

type Ts = { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined;
const tsMs = (t: Ts) => {
  if (!t) return NaN;
  const s = typeof t.seconds === 'number' ? t.seconds : (t.seconds?.toNumber() ?? 0);
  return s * 1000 + (t.nanos ?? 0) / 1e6;
};
/** temporal.api.enums.v1.TimeoutType */
const TIMEOUT_TYPES: Record<number, string> = { 1: 'start-to-close', 2: 'schedule-to-start', 3: 'schedule-to-close', 4: 'heartbeat' };
type EventId = { toString(): string } | number | null | undefined;
const key = (id: EventId) => String(id ?? '');

interface HistoryFigures {
  events: number;
  /** The server handed the first workflow task back with the start (eager start), rather than queueing it for a poll. */
  startedEagerly: boolean;
  workflowTasks: number;
  activities: Map<string, number>;
  timers: number;
  /** Wall time of the Temporal execution, first event to last. */
  totalMs: number;
  /** Started event → first workflow task started: the start waiting for the worker. */
  firstPickupMs: number;
  /** Of wftQueueMs: the first workflow task's (the normal task queue; later ones go to the worker's sticky queue). */
  firstWftQueueMs: number;
  wftQueueMs: number;
  wftRunMs: number;
  activityQueueMs: number;
  activityRunMs: Map<string, number>;
  timerMs: number;
  /** Workflow tasks that timed out (e.g. the sticky queue's schedule-to-start) or failed, and activity attempts that did. */
  wftTimedOut: number;
  /** By timeout type: schedule-to-start is the worker's sticky queue giving up after 10 s (the task moves to the normal queue). */
  wftTimeouts: Map<string, number>;
  wftFailed: number;
  activityTimedOut: number;
  activityFailed: number;
  /** Attempts beyond the first of activities that did complete (ActivityTaskStarted.attempt - 1). */
  activityRetries: number;
}

/** Counts and durations from one journey's history (its events, in order). */
function analyseHistory(events: { eventId?: EventId; eventTime?: Ts; [attrs: string]: unknown }[]): HistoryFigures {
  const started = events[0] as { workflowExecutionStartedEventAttributes?: { eagerExecutionAccepted?: boolean | null } | null } | undefined;
  const f: HistoryFigures = {
    events: events.length,
    startedEagerly: !!started?.workflowExecutionStartedEventAttributes?.eagerExecutionAccepted,
    workflowTasks: 0,
    activities: new Map(),
    timers: 0,
    totalMs: tsMs(events[events.length - 1]?.eventTime) - tsMs(events[0]?.eventTime),
    firstPickupMs: NaN,
    firstWftQueueMs: NaN,
    wftQueueMs: 0,
    wftRunMs: 0,
    activityQueueMs: 0,
    activityRunMs: new Map(),
    timerMs: 0,
    wftTimedOut: 0,
    wftTimeouts: new Map(),
    wftFailed: 0,
    activityTimedOut: 0,
    activityFailed: 0,
    activityRetries: 0,
  };
  const at = new Map<string, number>();
  const activityType = new Map<string, string>();
  const t0 = tsMs(events[0]?.eventTime);
  for (const e of events) {
    const t = tsMs(e.eventTime);
    at.set(key(e.eventId), t);
    const a = e as Record<
      string,
      {
        scheduledEventId?: EventId;
        startedEventId?: EventId;
        attempt?: number | null;
        timeoutType?: number | null;
        activityType?: { name?: string | null } | null;
      } | null | undefined
    >;
    if (a.workflowTaskStartedEventAttributes) {
      f.workflowTasks += 1;
      const queued = t - at.get(key(a.workflowTaskStartedEventAttributes.scheduledEventId))!;
      f.wftQueueMs += queued;
      if (Number.isNaN(f.firstPickupMs)) [f.firstPickupMs, f.firstWftQueueMs] = [t - t0, queued];
    } else if (a.workflowTaskCompletedEventAttributes) {
      f.wftRunMs += t - at.get(key(a.workflowTaskCompletedEventAttributes.startedEventId))!;
    } else if (a.activityTaskScheduledEventAttributes) {
      const name = a.activityTaskScheduledEventAttributes.activityType?.name ?? '?';
      activityType.set(key(e.eventId), name);
      f.activities.set(name, (f.activities.get(name) ?? 0) + 1);
    } else if (a.activityTaskStartedEventAttributes) {
      f.activityQueueMs += t - at.get(key(a.activityTaskStartedEventAttributes.scheduledEventId))!;
      f.activityRetries += Math.max(0, (a.activityTaskStartedEventAttributes.attempt ?? 1) - 1);
    } else if (a.activityTaskCompletedEventAttributes) {
      const name = activityType.get(key(a.activityTaskCompletedEventAttributes.scheduledEventId)) ?? '?';
      f.activityRunMs.set(name, (f.activityRunMs.get(name) ?? 0) + t - at.get(key(a.activityTaskCompletedEventAttributes.startedEventId))!);
    } else if (a.workflowTaskTimedOutEventAttributes) {
      f.wftTimedOut += 1;
      const type = TIMEOUT_TYPES[a.workflowTaskTimedOutEventAttributes.timeoutType ?? 0] ?? `type ${a.workflowTaskTimedOutEventAttributes.timeoutType}`;
      f.wftTimeouts.set(type, (f.wftTimeouts.get(type) ?? 0) + 1);
    } else if (a.workflowTaskFailedEventAttributes) {
      f.wftFailed += 1;
    } else if (a.activityTaskTimedOutEventAttributes) {
      f.activityTimedOut += 1;
    } else if (a.activityTaskFailedEventAttributes) {
      f.activityFailed += 1;
    } else if (a.timerStartedEventAttributes) {
      f.timers += 1;
    } else if (a.timerFiredEventAttributes) {
      f.timerMs += t - at.get(key(a.timerFiredEventAttributes.startedEventId))!;
    }
  }
  return f;
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const stack = await startStack({
    teardown,
    checkpoint: () => stop.checkpoint(),
    concurrency: opts.concurrency,
    topology: opts.topology,
    env: { JOURNEY_TIME_SCALE: String(opts.timeScale) },
    ...(opts.workerOptions ? { workerOptions: opts.workerOptions } : {}),
  });
  const { client, sink, orm, gateway } = stack;
  const sql = <T>(text: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(text, params);

  await verifiedDomain(stack, DOMAIN);
  const template = async (name: string, t: { subject: string; body: string }) =>
    (await expectStatus(client.request('POST', '/templates', { name, ...t, from: `hello@${DOMAIN}`, fromName: 'Bench' }), 201, `template ${name}`)).id;
  const templateIds = { welcome: await template('welcome', TEMPLATES.welcome), followUp: await template('follow-up', TEMPLATES.followUp) };
  // The warm-up (bench/harness.ts warmUp) runs before the workflow exists, so it triggers nothing.
  await warmUp(stack, stop, { n: opts.n, count: opts.warmUp, concurrency: opts.concurrency, tables: 'contacts, events', what: 'tracks', cold: opts.cold }, (i) =>
    client.request('POST', '/v1/track', { email: `warmup${i}@bench.example.org`, event: EVENT, data: { plan: 'free' } }),
  );
  const workflowId = await buildJourney(client, opts.shape, templateIds);
  const emailsPer = opts.shape.filter((st) => st.type === 'SEND_EMAIL').length;
  log(`domain ${DOMAIN} verified; workflow ${workflowId} enabled: ${describeShape(opts.shape)} (JOURNEY_TIME_SCALE=${stack.config.journeyTimeScale})`);
  stop.checkpoint();

  // The load: request i tracks `signup` for user<i>, a new contact.
  const tally = new RequestTally(opts.n);
  let lastOk = 0;
  const counts = async () =>
    (
      await sql<{ started: number; finished: number }>(
        `select count(*)::int as started, count(*) filter (where status in (${TERMINAL.map(() => '?').join(',')}))::int as finished from workflow_executions`,
        TERMINAL,
      )
    )[0]!;
  // The ORM's connection pool (knex/tarn), shared by the API and the activities as in cli/start.ts: sampled every 100 ms
  // when the service is in this process (otherwise `orm` is only the bench's own).
  const pool = stack.servicePids.length
    ? undefined
    : (orm.em.getConnection().getKnex().client as { pool?: { numUsed(): number; numPendingAcquires(): number } }).pool;
  const poolSamples: { used: number; waiting: number }[] = [];
  const poolTimer = setInterval(() => pool && poolSamples.push({ used: pool.numUsed(), waiting: pool.numPendingAcquires() }), 100);
  teardown.add(async () => clearInterval(poolTimer));
  const loadBefore = os.loadavg()[0]!;
  const cpuBefore = cpuSnapshot(stack);
  const serviceCpuBefore = serviceCpuSeconds(stack);
  const serviceLoopBefore = stack.apiPid ? mainThreadOf(stack.apiPid) : undefined;
  const eluBefore = performance.eventLoopUtilization();
  const wallStart = Date.now();
  const start = performance.now();
  let last = { tracked: 0, started: 0, finished: 0, delivered: 0 };
  let busy = false;
  const progress = setInterval(() => {
    if (busy) return;
    busy = true;
    counts()
      .then((c) => {
        const now = { tracked: tally.ok, started: c.started, finished: c.finished, delivered: sink.messages.length };
        const d = (k: keyof typeof now) => `${now[k]} (+${((now[k] - last[k]) / 5).toFixed(0)}/s)`;
        log(`${((performance.now() - start) / 1000).toFixed(0)} s: tracked ${d('tracked')}, executions started ${d('started')}, finished ${d('finished')}, emails delivered ${d('delivered')}`);
        last = now;
      })
      .catch((err: unknown) => log(`progress: ${(err as Error).message}`))
      .finally(() => (busy = false));
  }, 5_000);
  teardown.add(async () => clearInterval(progress));

  await closedLoop(opts.n, opts.concurrency, async (i) => {
    if (stop.interrupted) return;
    const res = await tally.request(() =>
      client.request('POST', '/v1/track', { email: `user${i}@bench.example.org`, event: EVENT, data: { plan: PLANS[i % PLANS.length] } }),
    );
    if (res) lastOk = performance.now();
  });
  const trackedS = (lastOk - start) / 1000;
  log(`${tally.ok} events tracked in ${trackedS.toFixed(1)} s; waiting for the executions and the sink`);

  // Until every execution has ended and 2 emails per execution are at the sink (or a minute without progress).
  let c = await counts();
  let seen = '';
  let lastProgress = Date.now();
  while (!stop.interrupted && (c.finished < c.started || c.started < tally.ok || sink.messages.length < emailsPer * c.started) && Date.now() - lastProgress < 60_000) {
    await new Promise((r) => setTimeout(r, 200));
    c = await counts();
    const now = `${c.started}/${c.finished}/${sink.messages.length}`;
    if (now !== seen) [seen, lastProgress] = [now, Date.now()];
  }
  const waitEnd = Date.now();
  clearInterval(progress);
  clearInterval(poolTimer);
  const cpuAfter = cpuSnapshot(stack);
  const serviceCpu = cpuUsedBetween(serviceCpuBefore, serviceCpuSeconds(stack));
  const serviceCpuS = serviceCpu?.total;
  const serviceLoopAfter = stack.apiPid ? mainThreadOf(stack.apiPid) : undefined;
  const elu = performance.eventLoopUtilization(eluBefore);
  const loadAfter = os.loadavg()[0]!;
  // A late message would show up as "unexpected": give stragglers a moment before counting.
  await new Promise((r) => setTimeout(r, 500));

  // The same-run reference (after the load: see the header): a bare one-activity workflow on the same dev server.
  const bare = await bareWorkflowRate(stack, {
    n: opts.n,
    concurrency: opts.concurrency,
    interrupted: () => stop.interrupted,
    ...(opts.workerOptions ? { workerOptions: opts.workerOptions } : {}),
  });
  log(`bare one-activity workflow: ${perSec(bare.n, bare.startedSeconds)} started/s, ${perSec(bare.completed, bare.completedSeconds)} completed/s`);
  stop.checkpoint();

  // ---- Figures from the database ----
  const executions = await sql<{ id: string; contact_id: string; status: string; started: number; finished: number | null }>(
    `select id, contact_id, status, extract(epoch from started_at) * 1000 as started, extract(epoch from finished_at) * 1000 as finished
     from workflow_executions where workflow_id = ? order by started_at`,
    [workflowId],
  );
  const byStatus = new Map<string, number>();
  for (const e of executions) byStatus.set(e.status, (byStatus.get(e.status) ?? 0) + 1);
  const startedTimes = executions.map((e) => Number(e.started));
  const finishedTimes = executions.filter((e) => e.finished !== null).map((e) => Number(e.finished));
  const lastStarted = Math.max(...startedTimes);
  const lastFinished = Math.max(...finishedTimes);
  const durations = executions.filter((e) => e.finished !== null).map((e) => Number(e.finished) - Number(e.started));

  const steps = await sql<{ execution_id: string; seq: number; step_type: string; status: string; started: number; finished: number | null }>(
    `select execution_id, seq, step_type, status, extract(epoch from started_at) * 1000 as started, extract(epoch from finished_at) * 1000 as finished
     from execution_steps order by execution_id, seq`,
  );
  const stepsOf = new Map<string, typeof steps>();
  for (const s of steps) stepsOf.set(s.execution_id, [...(stepsOf.get(s.execution_id) ?? []), s]);
  // Per execution: claim → step 1 started, each step, step k finished → step k+1 started, last step → finished.
  const phases = new Map<string, number[]>();
  const phase = (name: string, v: number) => phases.set(name, [...(phases.get(name) ?? []), v]);
  const stepCount = opts.shape.length;
  const wellFormedShape = opts.shape.map((st) => `${st.type}:COMPLETED`).join(',');
  let wellFormed = 0;
  for (const e of executions) {
    const ss = stepsOf.get(e.id) ?? [];
    if (ss.map((s) => `${s.step_type}:${s.status}`).join(',') === wellFormedShape) wellFormed++;
    if (ss.length !== stepCount || e.finished === null || ss.some((s) => s.finished === null)) continue;
    phase('start → step 1', Number(ss[0]!.started) - Number(e.started));
    ss.forEach((s, k) => {
      phase(`${k + 1} ${s.step_type}`, Number(s.finished) - Number(s.started));
      if (k > 0) phase(`between ${k} and ${k + 1}`, Number(s.started) - Number(ss[k - 1]!.finished));
    });
    phase(`step ${stepCount} → finished`, Number(e.finished) - Number(ss[stepCount - 1]!.finished));
  }
  const phaseOrder = [
    'start → step 1',
    ...opts.shape.flatMap((st, k) => [...(k > 0 ? [`between ${k} and ${k + 1}`] : []), `${k + 1} ${st.type}`]),
    `step ${stepCount} → finished`,
  ];

  const emailRows = await sql<{ id: string; to_email: string; status: string; source: string }>('select id, to_email, status, source from emails');
  const emailsById = new Map(emailRows.map((r) => [r.id, r]));
  const emailsSent = emailRows.filter((r) => r.status === 'SENT' && r.source === 'workflow').length;

  // ---- Checks on what the sink received ----
  const ids = new Map<string, number>();
  const perRecipient = new Map<string, number>();
  let unsigned = 0;
  let withoutRow = 0;
  for (const m of sink.messages) {
    const h = headersOf(m.raw);
    const id = h.messageId?.slice(1, h.messageId.indexOf('@'));
    if (id) ids.set(id, (ids.get(id) ?? 0) + 1);
    if (!id || !emailsById.has(id)) withoutRow++;
    if (h.dkimDomain !== DOMAIN) unsigned++;
    for (const to of m.envelope.to) perRecipient.set(to, (perRecipient.get(to) ?? 0) + 1);
  }
  const uniqueIds = [...ids.values()].filter((n) => n === 1).length;
  const duplicatedIds = [...ids.values()].filter((n) => n > 1).length;
  let contactsServed = 0;
  for (let i = 0; i < opts.n; i++) if (perRecipient.get(`user${i}@bench.example.org`) === emailsPer) contactsServed++;
  const exactlyOnce = uniqueIds === emailsPer * opts.n && duplicatedIds === 0 && ids.size === sink.messages.length;
  const completed = byStatus.get('COMPLETED') ?? 0;
  const errors = opts.n - tally.ok;
  const checks = [
    [errors === 0, `${tally.ok}/${opts.n} tracks answered 200`],
    [executions.length === opts.n, `${executions.length}/${opts.n} executions`],
    [completed === opts.n, `${completed}/${opts.n} COMPLETED (${[...byStatus].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'})`],
    [wellFormed === opts.n, `${wellFormed}/${opts.n} with steps ${opts.shape.map((st) => st.type).join(', ')} all COMPLETED`],
    [sink.messages.length === emailsPer * opts.n, `${sink.messages.length}/${emailsPer * opts.n} messages at the sink`],
    [exactlyOnce, `${uniqueIds} unique Message-IDs (${duplicatedIds} duplicated)`],
    [withoutRow === 0 && unsigned === 0, `${withoutRow} without an emails row, ${unsigned} not signed for ${DOMAIN}`],
    [contactsServed === opts.n, `${contactsServed}/${opts.n} contacts got exactly ${emailsPer} message(s)`],
    [emailsSent === emailsPer * opts.n, `${emailsSent}/${emailsPer * opts.n} workflow emails rows SENT`],
  ] as const;
  const checkOk = !stop.interrupted && checks.every(([pass]) => pass);

  // ---- Where the time goes, from a sample of Temporal histories (after the measurement) ----
  const sampleSize = Math.min(opts.histories, executions.length);
  const sample = Array.from({ length: sampleSize }, (_, k) => executions[Math.floor((k * executions.length) / sampleSize)]!);
  const histories: HistoryFigures[] = [];
  let historiesMissing = 0;
  await closedLoop(sample.length, 8, async (k) => {
    try {
      const history = await gateway.client.workflow.getHandle(workflowIds.journey(sample[k]!.id)).fetchHistory();
      histories.push(analyseHistory((history.events ?? []) as Parameters<typeof analyseHistory>[0]));
    } catch {
      historiesMissing++; // no Temporal workflow under the execution's journey id
    }
  });
  const avg = (pick: (h: HistoryFigures) => number) => mean(histories.map(pick));
  const sum = (pick: (h: HistoryFigures) => number) => histories.reduce((a, h) => a + pick(h), 0);
  const activityNames = [...new Set(histories.flatMap((h) => [...h.activities.keys()]))];
  const activitiesPerExecution = avg((h) => [...h.activities.values()].reduce((a, b) => a + b, 0));
  const activityRun = avg((h) => [...h.activityRunMs.values()].reduce((a, b) => a + b, 0));
  const accounted = (h: HistoryFigures) => h.wftQueueMs + h.wftRunMs + h.activityQueueMs + [...h.activityRunMs.values()].reduce((a, b) => a + b, 0) + h.timerMs;

  const runS = (waitEnd - wallStart) / 1000;
  const cpu = (k: keyof typeof cpuBefore) => cpuAfter[k] - cpuBefore[k];
  const cpuLine = (k: keyof typeof cpuBefore, label: string) => `${label} ${cpu(k).toFixed(1)} s (${((100 * cpu(k)) / runS).toFixed(0)}% of a core)`;
  const cores = os.cpus().length;
  const workerOptions = stack.worker?.worker.options;
  const slots = (s: unknown) => ((s as { numSlots?: number }).numSlots ?? (s as { type?: string }).type ?? '?');
  const pollers = (b: unknown) => {
    const p = b as { type?: string; maximum?: number; minimum?: number };
    return p.type === 'simple-maximum' ? `${p.maximum}` : `${p.type} ${p.minimum ?? '?'}–${p.maximum ?? '?'}`;
  };
  const workflowTasks = avg((h) => h.workflowTasks);
  const perExecution = (cpuS: number) => (1000 * cpuS) / Math.max(1, finishedTimes.length);
  const cpuPerExecution = (k: keyof typeof cpuBefore) => perExecution(cpu(k));
  const cpuTotalPerExecution = perExecution(serviceCpuS ?? 0) + cpuPerExecution('node') + cpuPerExecution('temporal') + cpuPerExecution('postgres');
  const serviceLoopS = serviceLoopBefore && serviceLoopAfter ? serviceLoopAfter.cpuSeconds - serviceLoopBefore.cpuSeconds : undefined;
  const lastDelivered = sink.messages[sink.messages.length - 1];
  const deliveredS = lastDelivered ? (lastDelivered.receivedAt.getTime() - wallStart) / 1000 : NaN;
  const startedS = (lastStarted - wallStart) / 1000;
  // Journeys started while the load was still being answered took CPU from it.
  const startedDuringLoad = startedTimes.filter((t) => t <= wallStart + trackedS * 1000).length;
  const finishedS = (lastFinished - wallStart) / 1000;
  const firstFinished = Math.min(...finishedTimes);
  const trackRate = tally.ok / trackedS;
  const trackP99 = percentile(sortedOf(tally.latencies.subarray(0, tally.done)), 99);
  const bareStarted = bare.n / bare.startedSeconds;
  const completedRatio = finishedTimes.length / finishedS / (bare.completed / bare.completedSeconds);

  const lines = [
    '',
    `Tidings workflows bench: POST /v1/track "${EVENT}" for N=${opts.n} new contacts, concurrency ${opts.concurrency} keep-alive clients, shape ${opts.shapeName}`,
    `  environment   ${environmentLine(stack.db.serverVersion)}`,
    `                N=${opts.n}, concurrency ${opts.concurrency}, ${cores} cores; load average ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after (1-minute; other work on the machine skews the figures)`,
    `  setup         topology ${stack.topology}: ${serviceSetup(stack)}; this process runs the load generator, the DNS server and the SMTP sink;`,
    `                PostgreSQL and the Temporal dev server (in-memory, headless) are separate processes on the same machine`,
    warmthLine(opts.cold, `${opts.warmUp} tracks for other contacts (before the workflow exists)`),
    `  payload       {email, event: "${EVENT}", data: {plan}}: the plan is stored on the contact (persistent) and the templates render from it`,
    workerOptions
      ? `  worker        ${opts.workerOptions ? `temporal/worker.ts options + ${JSON.stringify(opts.workerOptions)}` : 'temporal/worker.ts options (WORKER_TUNING)'}: ` +
        `${slots(workerOptions.tuner.workflowTaskSlotSupplier)} workflow-task slots, ${pollers(workerOptions.workflowTaskPollerBehavior)} workflow-task pollers ` +
        `(non-sticky ratio ${workerOptions.nonStickyToStickyPollRatio}), ${slots(workerOptions.tuner.activityTaskSlotSupplier)} activity slots, ` +
        `${pollers(workerOptions.activityTaskPollerBehavior)} activity pollers, ${workerOptions.workflowThreadPoolSize} workflow thread(s), ${workerOptions.maxCachedWorkflows} cached workflows`
      : `  worker        the service's, temporal/worker.ts options (WORKER_TUNING)`,
    `  rate limit    RATE_LIMIT_PER_MINUTE raised to ${BENCH_RATE_LIMIT} (default 1000): the limiter still counts every request but never throttles`,
    `  workflow      ${describeShape(opts.shape)}; DKIM-signed (RSA-2048)`,
    opts.shape.some((st) => st.type === 'DELAY')
      ? `  time scale    JOURNEY_TIME_SCALE=${stack.config.journeyTimeScale}: the ${DELAY.amount}-minute DELAY lasts ${DELAY_MS * stack.config.journeyTimeScale} ms`
      : `  time scale    no DELAY in this shape`,
    `  baseline      bare one-activity workflow (bench/baseline-workflow.ts) on its own worker and task queue, same dev server, after the load: ${bare.n} executions, ${bare.concurrency} starts in flight (${bare.startsFailed} failed):`,
    `                ${perSec(bare.n, bare.startedSeconds)} started/s (each ${dist(bare.startLatencies)}), ${bare.completed} completed by ${secs(bare.completedSeconds)}: ${perSec(bare.completed, bare.completedSeconds)} completed/s (first start to the last close)`,
    `  tracked       ${tally.ok} events in ${secs(trackedS)}: ${perSec(tally.ok, trackedS)} tracks/s at the API (first request to last 200)`,
    `  latency       ${dist(tally.latencies.subarray(0, tally.done))}`,
    `  started       ${executions.length} executions by ${secs(startedS)}: ${perSec(executions.length, startedS)} executions started/s (first request to the last started_at); ${startedDuringLoad} before the last track was answered`,
    `  completed     ${finishedTimes.length} executions by ${secs(finishedS)}: ${perSec(finishedTimes.length, finishedS)} executions completed/s (first request to the last finished_at);` +
      ` first finished at ${secs((firstFinished - wallStart) / 1000)}, ${perSec(finishedTimes.length - 1, (lastFinished - firstFinished) / 1000)}/s from the first to the last`,
    `  delivered     ${sink.messages.length} emails by ${secs(deliveredS)}: ${perSec(sink.messages.length, deliveredS)} emails/s at the sink (first request to last message)`,
    `  ratio         journey executions completed/s ÷ bare one-activity workflow completed/s = ${completedRatio.toFixed(2)}; tracks/s ÷ bare started/s = ${(trackRate / bareStarted).toFixed(2)}`,
    `  duration      one execution, started_at → finished_at: ${dist(durations)}`,
    `  errors        ${errors}${tally.errorDetail()}`,
    `  check         ${checkOk ? 'OK' : 'FAILED'}: ${checks.map(([pass, text]) => `${pass ? '' : '✗ '}${text}`).join('; ')}`,
    ...(opts.shapeName === 'send-only'
      ? [
          `  goals         (for one enabled TRIGGER → SEND_EMAIL workflow, 16 clients, 2 cores${opts.cold ? '; set for a warm database' : ''})`,
          ...goalLines([
            { goal: '≥ 1,000 accepted/s', met: trackRate >= 1000, measured: `${trackRate.toFixed(0)} tracks/s (${(trackRate / 1000).toFixed(2)} of it)` },
            { goal: 'p99 < 100 ms', met: trackP99 < 100, measured: ms(trackP99) },
            { goal: 'completed ≥ 0.8 × bare one-activity workflow', met: completedRatio >= 0.8, measured: `${completedRatio.toFixed(2)} ×` },
            { goal: 'each email once', met: exactlyOnce, measured: `${uniqueIds} unique, ${duplicatedIds} duplicated, ${sink.messages.length}/${emailsPer * opts.n} at the sink` },
          ]),
        ]
      : []),
    '',
    'Where the time goes',
    `  steps (database)  per execution, mean / p95 from execution_steps (bookkeeping activities and workflow tasks are in the "→" and "between" rows):`,
    ...phaseOrder.map((p) => {
      const v = phases.get(p) ?? [];
      return `                      ${p.padEnd(18)} ${ms(mean(v)).padStart(10)} / ${ms(percentile(sortedOf(v), 95)).padStart(10)}`;
    }),
    `  histories         ${histories.length} executions sampled evenly by start${historiesMissing ? ` (${historiesMissing} more had no Temporal workflow under their journey id)` : ''}: ${avg((h) => h.events).toFixed(0)} history events, ${avg((h) => h.workflowTasks).toFixed(1)} workflow tasks, ${activitiesPerExecution.toFixed(1)} activities, ${avg((h) => h.timers).toFixed(0)} timer per execution; ${histories.filter((h) => h.startedEagerly).length} started eagerly`,
    `                    not first time right: ${sum((h) => h.wftTimedOut)} workflow tasks timed out${
      sum((h) => h.wftTimedOut) > 0 ? ` (${[...new Set(histories.flatMap((h) => [...h.wftTimeouts.keys()]))].map((t) => `${t} ${sum((h) => h.wftTimeouts.get(t) ?? 0)}`).join(', ')})` : ''
    } and ${sum((h) => h.wftFailed)} failed, ` +
      `${sum((h) => h.activityTimedOut)} activities timed out and ${sum((h) => h.activityFailed)} failed for good, ${sum((h) => h.activityRetries)} activity retries (attempts after the first); ` +
      `in ${histories.filter((h) => h.wftTimedOut + h.wftFailed + h.activityTimedOut + h.activityFailed + h.activityRetries > 0).length} of the ${histories.length} histories`,
    `                    activities: ${activityNames.map((a) => `${a} ×${avg((h) => h.activities.get(a) ?? 0).toFixed(0)} (run ${ms(avg((h) => (h.activityRunMs.get(a) ?? 0) / (h.activities.get(a) || 1)))} each)`).join(', ')}`,
    `                    mean per execution: ${ms(avg((h) => h.totalMs))} in Temporal, of which workflow tasks queued ${ms(avg((h) => h.wftQueueMs))} (the first ${ms(avg((h) => h.firstWftQueueMs))}, ` +
      `the other ${(workflowTasks - 1).toFixed(0)} ${ms(avg((h) => (h.wftQueueMs - h.firstWftQueueMs) / Math.max(1, h.workflowTasks - 1)))} each) and ran ${ms(avg((h) => h.wftRunMs))},` +
      ` activities queued ${ms(avg((h) => h.activityQueueMs))} and ran ${ms(activityRun)}, timer ${ms(avg((h) => h.timerMs))}, other ${ms(avg((h) => h.totalMs - accounted(h)))};` +
      ` first pickup by the worker ${ms(avg((h) => h.firstPickupMs))} after the start`,
    `  task rate         ${(workflowTasks * finishedTimes.length).toFixed(0)} workflow tasks and ${(activitiesPerExecution * finishedTimes.length).toFixed(0)} activities in ${secs(runS)}: ` +
      `${perSec(workflowTasks * finishedTimes.length, runS)} workflow tasks/s, ${perSec(activitiesPerExecution * finishedTimes.length, runS)} activities/s (counts per execution × executions)`,
    pool
      ? `  DB pool           ${stack.orm.config.get('pool')?.max ?? '?'} connections at most, shared by the API and the activities; sampled every 100 ms during the run: ` +
        `in use mean ${mean(poolSamples.map((p) => p.used)).toFixed(1)}, max ${Math.max(0, ...poolSamples.map((p) => p.used))}; ` +
        `queries waiting for a connection mean ${mean(poolSamples.map((p) => p.waiting)).toFixed(1)}, max ${Math.max(0, ...poolSamples.map((p) => p.waiting))}, ` +
        `in ${((100 * poolSamples.filter((p) => p.waiting > 0).length) / Math.max(1, poolSamples.length)).toFixed(0)}% of the samples`
      : `  DB pool           in the service's process: not sampled`,
    `  CPU               during the run (${secs(runS)}, ${cores} cores = ${(cores * runS).toFixed(0)} core-s): ` +
      (serviceCpuS === undefined
        ? `${cpuLine('node', 'this process')} (main thread event loop ${(100 * elu.utilization).toFixed(0)}% busy), `
        : `${describeServiceCpu(serviceCpu!)} (${((100 * serviceCpuS) / runS).toFixed(0)}% of a core${serviceLoopS === undefined ? '' : `; the API's main thread ${serviceLoopS.toFixed(1)} s`}), ` +
          `${cpuLine('node', 'this process (load generator, sink)')}, `) +
      `${cpuLine('temporal', 'Temporal server')}, ${cpuLine('postgres', `PostgreSQL backends of ${stack.db.name}`)} ` +
      `(the whole server, other databases' work and background processes included: ${cpu('postgresServer').toFixed(1)} s)`,
    `                    per execution: ${serviceCpu === undefined ? '' : `the service ${describeServiceCpu(serviceCpu, { count: finishedTimes.length })}, `}this process ${ms(cpuPerExecution('node'))}, Temporal ${ms(cpuPerExecution('temporal'))}, PostgreSQL ${ms(cpuPerExecution('postgres'))} = ${ms(cpuTotalPerExecution)} of CPU;` +
      ` ${cores} cores doing nothing else would allow about ${perSec(cores, cpuTotalPerExecution / 1000)} executions/s`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  printResult({
    bench: 'workflows',
    shape: opts.shapeName,
    topology: stack.topology,
    cold: opts.cold,
    n: opts.n,
    concurrency: opts.concurrency,
    tracksPerS: trackRate,
    p99Ms: trackP99,
    completedPerS: finishedTimes.length / finishedS,
    bareCompletedPerS: bare.completed / bare.completedSeconds,
    completedOverBare: completedRatio,
    serviceCpuMsPerExecution: serviceCpuS === undefined ? null : perExecution(serviceCpuS),
    exactlyOnce,
    checkOk,
    interrupted: stop.interrupted,
  });
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
