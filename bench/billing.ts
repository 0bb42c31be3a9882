/**
 * The billing cap check against the month's volume: what db/billing/allowance.ts allowance() costs a capped
 * category (advisory lock + count of the month's emails) and an uncapped one (one lookup).
 *
 *   npx tsx bench/billing.ts [--runs 20]
 *
 * Sets up and tears down itself: a fresh database on the PostgreSQL server of
 * BENCH_POSTGRES_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), migrated,
 * dropped at the end (bench/harness.ts freshDatabase). No Temporal and no API: this times the very
 * call queueSend (requireAllowance), the campaign batches and workflow steps make, `lock: true`
 * inside a transaction, as they run it.
 *
 * Data, set-based (generate_series): one project's transactional emails, created at random moments
 * between the start of this month (UTC) and now, DELIVERED, with a short HTML body; the month grows
 * 10,000 → 100,000 → 1,000,000. Beside them, as many of the same project's emails of last month and
 * as many of another project's of this month, so the count has to find its rows in a table three
 * times their number. VACUUM ANALYZE after each step, as autovacuum would leave the table.
 * At each volume, `--runs` rounds after a warm-up round; a round times the check once capped (a
 * billing_limits row above the volume, so the count runs and passes) and once uncapped (the row
 * removed), alternately, so load from other work on the machine hits both alike. Median per volume.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { allowance, monthContaining, setBillingLimits } from '../db/billing/allowance';
import { createOrm, migrate, type Orm } from '../db/orm';
import { createProject } from '../db/projects/projects';
import { query } from '../db/sql';
import { freshDatabase, type Interruption, runBench, type Teardown } from './harness';
import { environmentLine, log, percentile, positiveInt } from './support';

const VOLUMES = [10_000, 100_000, 1_000_000];
/** Above every volume: the capped check counts and lets the send through, as under a generous plan. */
const CAP = 2_000_000_000;
const BODY = '<p>Hi there,</p><p>your order has shipped and is on its way. Track it any time from your account page.</p><p>Thanks for shopping with us!</p>';

function options() {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/billing.ts [--runs 20]\n');
    process.exit(0);
  }
  return { runs: positiveInt('runs', values.runs) };
}

/** Emails from+1 … to of the project, created at random moments between `start` and `end`. */
async function addEmails(orm: Orm, projectId: string, from: number, to: number, start: Date, end: Date): Promise<void> {
  await query(
    orm.em.fork(),
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, created_at, updated_at, sent_at)
     select gen_random_uuid(), ?, 'transactional', 'user' || g || '@bench.example.com', 'shop@bench.example.com',
            'Your order ' || g || ' has shipped', ?, 'DELIVERED', t.at, t.at, t.at
     from generate_series(?::bigint, ?::bigint) g,
          lateral (select ?::timestamptz + random() * (?::timestamptz - ?::timestamptz) as at) t`,
    [projectId, BODY, from + 1, to, start, end, start],
  );
}

/** One allowance() call the way the writers make it: locked, inside a transaction. Milliseconds and the count it saw. */
async function timedCheck(orm: Orm, projectId: string): Promise<{ ms: number; used: number }> {
  return orm.em.fork().transactional(async (tx) => {
    const t0 = performance.now();
    const a = await allowance(tx, projectId, 'transactional', { lock: true });
    return { ms: performance.now() - t0, used: a.used };
  });
}

async function measure(orm: Orm, projectId: string, volume: number, runs: number) {
  const capped: number[] = [];
  const uncapped: number[] = [];
  for (let r = 0; r <= runs; r++) {
    await setBillingLimits(orm.em.fork(), projectId, { transactional: CAP });
    const c = await timedCheck(orm, projectId);
    // The capped path must have counted the whole month, or the figure is not the one we claim.
    if (c.used !== volume) throw new Error(`capped check counted ${c.used} emails, expected ${volume}`);
    await setBillingLimits(orm.em.fork(), projectId, { transactional: null });
    const u = await timedCheck(orm, projectId);
    if (r === 0) continue; // warm-up round: plans and caches
    capped.push(c.ms);
    uncapped.push(u.ms);
  }
  const median = (xs: number[]) => percentile(Float64Array.from(xs).sort(), 50);
  return { volume, capped: median(capped), uncapped: median(uncapped) };
}

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  const db = await freshDatabase(teardown);
  const orm = await createOrm(db.url);
  teardown.add(() => orm.close());
  await migrate(orm);
  log(`database ${db.name} created and migrated`);
  const project = await createProject(orm.em.fork(), 'bench');
  const neighbour = await createProject(orm.em.fork(), 'bench neighbour');
  const month = monthContaining(new Date()).start;
  const lastMonth = new Date(Date.UTC(month.getUTCFullYear(), month.getUTCMonth() - 1, 1));
  stop.checkpoint();

  const loadBefore = os.loadavg()[0]!;
  const rows: Awaited<ReturnType<typeof measure>>[] = [];
  let have = 0;
  for (const volume of VOLUMES) {
    const t0 = performance.now();
    await addEmails(orm, project.id, have, volume, month, new Date());
    await addEmails(orm, project.id, have, volume, lastMonth, month);
    await addEmails(orm, neighbour.id, have, volume, month, new Date());
    // Outside a transaction (vacuum cannot run in one): fresh statistics and visibility map, as a settled table has.
    await query(orm.em.fork(), 'vacuum analyze emails');
    have = volume;
    log(`${volume.toLocaleString('en')} emails this month (${((performance.now() - t0) / 1000).toFixed(1)} s to add and vacuum)`);
    stop.checkpoint();
    rows.push(await measure(orm, project.id, volume, opts.runs));
    log(`${volume.toLocaleString('en')}: capped ${rows.at(-1)!.capped.toFixed(2)} ms, uncapped ${rows.at(-1)!.uncapped.toFixed(2)} ms`);
    stop.checkpoint();
  }
  const [size] = await query<{ heap: string; total: string }>(
    orm.em.fork(),
    `select pg_size_pretty(pg_relation_size('emails')) as heap, pg_size_pretty(pg_total_relation_size('emails')) as total`,
  );

  const lines = [
    '',
    `Billing cap check (db/billing/allowance.ts allowance, lock: true, in a transaction): median of ${opts.runs} runs after a warm-up, capped and uncapped alternating`,
    `  emails table at the end: heap ${size!.heap}, with indexes ${size!.total}; per volume step, the project's month, its last month and a neighbour's month`,
    `  environment   ${environmentLine(db.serverVersion)}`,
    `  load average  ${loadBefore.toFixed(1)} before, ${os.loadavg()[0]!.toFixed(1)} after (1-minute; other work on the machine skews the figures)`,
    '',
    '| emails this month | capped (ms) | uncapped (ms) | µs per email, capped | capped / uncapped |',
    '|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.volume.toLocaleString('en')} | ${r.capped.toFixed(2)} | ${r.uncapped.toFixed(2)} | ${((r.capped * 1000) / r.volume).toFixed(3)} | ${(r.capped / r.uncapped).toFixed(1)} |`,
    ),
    '',
  ];
  process.stdout.write(lines.join('\n'));
}

runBench(main);
