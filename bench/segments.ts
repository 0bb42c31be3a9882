/**
 * Segment member counts over 1,000,000 contacts.
 *
 *   npx tsx bench/segments.ts [--contacts 1000000] [--runs 3] [--keep]
 *
 * Sets up and tears down itself: a fresh database `tidings_bench_<time>` on the PostgreSQL server
 * of BENCH_POSTGRES_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), migrated,
 * dropped at the end (only that database; `--keep` leaves it, to EXPLAIN other statements on it).
 * No Temporal and no API: a count is one SQL statement, and this measures exactly the code
 * POST /segments/:id/refresh runs (db/segments/segments.ts
 * refreshSegmentCount → db/conditions/sql.ts), plus EXPLAIN ANALYZE of the same statement.
 *
 * Data, generated set-based (generate_series, no row-by-row inserts):
 *  - one project with N contacts (plus a second project with N/20, so project_id matters): ~86%
 *    subscribed; data {plan (free/starter/pro/enterprise/"Pro"), age (a number; 1 in 20 a numeric
 *    string, which the number-typed field still compares as a number), company, trial,
 *    signedUpAt (full ISO)}; created_at spread over two years; the field types registered as the
 *    API would have (contact_fields);
 *  - events: one `signup` per contact at its created_at, plus N/2 `purchase` events;
 *  - the events write their names into contacts.event_ids (trigger); VACUUM FULL contacts then
 *    (the load rewrote every contact in one statement), VACUUM ANALYZE, so the planner and
 *    index-only scans see what a settled database has.
 *
 * Then the write-path cost of that trigger: single-row event inserts with it on and off, same run.
 *
 * Conditions timed: data.plan equals 'pro' AND subscribed; data.age greaterThan 30; event.signup
 * triggeredWithin 7 days; and, for reference, the campaign audience "subscribed", createdAt within
 * 7 days, a data date field (data.signedUpAt within 30 days, the full-ISO rule), and an event filter
 * under OR (a test of contacts.event_ids, the names a contact has triggered, rather than a lookup in
 * events per contact). Each is run
 * first without the indexes migration 030000 adds (dropped), then with them (created again), then
 * with the typed slot columns of the fields the segments name (db/conditions/field-slots.ts: assigned
 * and back-filled as the prepareFieldSlots workflow does, then VACUUM FULL); a warm-up run then
 * `--runs` timed runs (median and min printed), each with its plan's outline. Last, what the slot
 * trigger costs a contact insert.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { createOrm, migrate, type Orm } from '../db/orm';
import { createProject } from '../db/projects/projects';
import { loadCompileContext } from '../db/conditions/compile-context';
import type { Condition } from '../db/conditions/grammar';
import { compileCondition } from '../db/conditions/sql';
import { createSegment, refreshSegmentCount } from '../db/segments/segments';
import { prepareFieldSlots } from '../db/conditions/field-slots';
import { createBenchDatabase, environmentLine, log, positiveInt } from './support';

const SEGMENT_INDEXES: Record<string, string> = {
  contacts_project_subscribed: 'create index contacts_project_subscribed on contacts (project_id, subscribed)',
  contacts_project_created: 'create index contacts_project_created on contacts (project_id, created_at)',
  events_name_time: 'create index events_name_time on events (project_id, name, created_at) include (contact_id)',
};

const CONDITIONS: { label: string; condition: Condition }[] = [
  {
    label: "data.plan equals 'pro' AND subscribed",
    condition: {
      logic: 'AND',
      groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }, { field: 'subscribed', operator: 'equals', value: true }] }],
    },
  },
  { label: 'data.age greaterThan 30', condition: { field: 'data.age', operator: 'greaterThan', value: 30 } },
  { label: 'event.signup triggeredWithin 7 days', condition: { field: 'event.signup', operator: 'triggeredWithin', value: 7, unit: 'days' } },
  { label: 'subscribed (campaign audience)', condition: { field: 'subscribed', operator: 'equals', value: true } },
  { label: 'createdAt within 7 days', condition: { field: 'createdAt', operator: 'within', value: 7, unit: 'days' } },
  { label: 'data.signedUpAt within 30 days', condition: { field: 'data.signedUpAt', operator: 'within', value: 30, unit: 'days' } },
  {
    label: "event.purchase triggered OR data.plan equals 'enterprise'",
    condition: {
      logic: 'OR',
      groups: [{ filters: [{ field: 'event.purchase', operator: 'triggered' }] }, { filters: [{ field: 'data.plan', operator: 'equals', value: 'enterprise' }] }],
    },
  },
];

function options() {
  const { values } = parseArgs({
    options: {
      contacts: { type: 'string', default: '1000000' },
      runs: { type: 'string', default: '3' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/segments.ts [--contacts 1000000] [--runs 3] [--keep]\n');
    process.exit(0);
  }
  return { contacts: positiveInt('contacts', values.contacts), runs: positiveInt('runs', values.runs), keep: values.keep };
}

async function timed<T>(label: string, work: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const out = await work();
  log(`${label}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return out;
}

async function generate(pg: Client, projectId: string, otherId: string, n: number): Promise<void> {
  const contacts = (project: string, count: number, prefix: string) =>
    pg.query(
      `insert into contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       select '${prefix}' || lpad(to_hex(g), 28, '0'), $1, 'user' || g || '@${prefix}.example.com', g % 7 <> 0,
              jsonb_build_object(
                'plan', (array['free','starter','pro','enterprise','Pro'])[1 + g % 5],
                'age', case when g % 20 = 0 then to_jsonb((18 + (g * 7919) % 63)::text) else to_jsonb(18 + (g * 7919) % 63) end,
                'company', 'Company ' || (g % 5000),
                'trial', g % 3 = 0,
                'signedUpAt', to_char(t.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
              t.at, t.at
       from generate_series(1::bigint, $2::bigint) g,
            lateral (select now() - (g % 730) * interval '1 day' - (g % 86400) * interval '1 second' as at) t`,
      [project, count],
    );
  await timed(`${n.toLocaleString('en')} contacts`, () => contacts(projectId, n, 'cnt_a'));
  await timed(`${Math.floor(n / 20).toLocaleString('en')} contacts in a second project`, () => contacts(otherId, Math.floor(n / 20), 'cnt_b'));
  await pg.query(
    `insert into contact_fields (project_id, key, type)
     select p, k, t from unnest(array[$1, $2]) p, (values ('plan','string'), ('age','number'), ('company','string'), ('trial','boolean'), ('signedUpAt','date')) f(k, t)`,
    [projectId, otherId],
  );
  await timed('signup events (one per contact)', () =>
    pg.query(
      `insert into events (id, project_id, contact_id, name, created_at)
       select 'evt_s' || substr(c.id, 4), c.project_id, c.id, 'signup', c.created_at from contacts c`,
    ),
  );
  await timed(`${Math.floor(n / 2).toLocaleString('en')} purchase events`, () =>
    pg.query(
      `insert into events (id, project_id, contact_id, name, created_at)
       select 'evt_p' || lpad(to_hex(g), 28, '0'), $1, 'cnt_a' || lpad(to_hex(1 + (g * 48271) % $2::bigint), 28, '0'), 'purchase',
              now() - (g % 365) * interval '1 day'
       from generate_series(1::bigint, $3::bigint) g`,
      [projectId, n, Math.floor(n / 2)],
    ),
  );
  // Each event above added its name to its contact (the events_note_name trigger), i.e. every
  // contact was written once more in one statement, which leaves half the table dead. A settled
  // table has that space reused by later writes; VACUUM FULL stands for that.
  const size = async () => (await pg.query<{ s: string }>(`select pg_size_pretty(pg_relation_size('contacts')) as s`)).rows[0]!.s;
  const loaded = await size();
  await timed('vacuum full contacts', () => pg.query('vacuum full contacts'));
  log(`contacts heap ${loaded} after the load, ${await size()} after vacuum full`);
  await timed('vacuum analyze', () => pg.query('vacuum analyze contacts, events, contact_fields'));
}

/**
 * What the event-name summary costs a write: single-row event inserts, each its own transaction
 * (as /v1/track writes them), with the trigger on and off in alternating blocks in the same run.
 * Timed inside the server (a procedure that inserts and commits row by row), so the client's round
 * trips, which vary more than the trigger costs on a shared machine, stay out. "known" events have a
 * name their contact already has (lookups, no write); "new" ones a name the contact lacks (the
 * contact row is written too).
 */
async function eventInsertCost(pg: Client, projectId: string, n: number): Promise<string> {
  const block = 1000;
  await pg.query(`
    create procedure pg_temp.insert_events(project text, name text, first bigint, count int, contacts bigint) language plpgsql as $$
    begin
      for i in 0..count - 1 loop
        insert into events (id, project_id, contact_id, name)
        values ('evt_w' || name || lpad(to_hex(first + i), 20, '0'), project, 'cnt_a' || lpad(to_hex(1 + ((first + i) * 7919) % contacts), 28, '0'), name);
        commit;
      end loop;
    end $$`);
  const micros = { on: { known: [] as number[], new: [] as number[] }, off: { known: [] as number[], new: [] as number[] } };
  let first = 0;
  // The WAL flush at each commit (a quarter of a millisecond or more here) would drown the difference.
  await pg.query('set synchronous_commit = off');
  for (let round = 0; round < 6; round++) {
    for (const state of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      await pg.query(`alter table events ${state === 'on' ? 'enable' : 'disable'} trigger events_note_name`);
      for (const kind of ['known', 'new'] as const) {
        const t0 = performance.now();
        await pg.query('call pg_temp.insert_events($1, $2, $3, $4, $5)', [projectId, kind === 'known' ? 'signup' : 'bench.write', first, block, n]);
        micros[state][kind].push(((performance.now() - t0) * 1000) / block);
        first += block;
      }
    }
  }
  await pg.query('alter table events enable trigger events_note_name');
  await pg.query('reset synchronous_commit');
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(0);
  return `Event insert (one row, its own transaction, synchronous_commit off, timed in the server; median of ${micros.on.known.length} blocks of ${block}): a name the contact has ${med(
    micros.off.known,
  )} µs without the trigger, ${med(micros.on.known)} µs with it; a name new to the contact ${med(micros.off.new)} µs without, ${med(micros.on.new)} µs with`;
}

/**
 * What the slot columns cost a contact write: single-row contact inserts (each its own
 * transaction, as POST /contacts writes a new one) into the project whose fields have slots, with
 * the slot trigger on and off in alternating blocks, timed in the server as eventInsertCost is.
 * "On" includes the slot values' index entries; "off" leaves the slots empty, so it has none.
 */
async function contactInsertCost(pg: Client, projectId: string): Promise<string> {
  const block = 1000;
  await pg.query(`
    create procedure pg_temp.insert_contacts(project text, first bigint, count int) language plpgsql as $$
    begin
      for i in 0..count - 1 loop
        insert into contacts (id, project_id, email, subscribed, data)
        values ('cnt_w' || lpad(to_hex(first + i), 27, '0'), project, 'writer' || (first + i) || '@bench.example.com', true,
                jsonb_build_object('plan', 'pro', 'age', 18 + (first + i) % 63, 'company', 'Company ' || i,
                                   'signedUpAt', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')));
        commit;
      end loop;
    end $$`);
  const micros = { on: [] as number[], off: [] as number[] };
  let first = 0;
  await pg.query('set synchronous_commit = off');
  for (let round = 0; round < 6; round++) {
    for (const state of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      await pg.query(`alter table contacts ${state === 'on' ? 'enable' : 'disable'} trigger contacts_fill_slots_insert`);
      const t0 = performance.now();
      await pg.query('call pg_temp.insert_contacts($1, $2, $3)', [projectId, first, block]);
      micros[state].push(((performance.now() - t0) * 1000) / block);
      first += block;
    }
  }
  await pg.query('alter table contacts enable trigger contacts_fill_slots_insert');
  await pg.query('reset synchronous_commit');
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(0);
  return `Contact insert into the project with 3 field slots (one row, its own transaction, synchronous_commit off, timed in the server; median of ${micros.on.length} blocks of ${block}): ${med(
    micros.off,
  )} µs with the slot trigger off, ${med(micros.on)} µs with it on`;
}

/** The plan's outline: node types with the index or relation each reads, deepest last. */
function outline(plan: Record<string, unknown>): string {
  const parts: string[] = [];
  const walk = (node: Record<string, unknown>) => {
    const type = String(node['Node Type']);
    const target = (node['Index Name'] ?? node['Relation Name']) as string | undefined;
    const workers = node['Workers Planned'] ? `×${String(node['Workers Planned'])}` : '';
    if (!['Aggregate', 'Result', 'Memoize'].includes(type)) parts.push(`${type}${workers}${target ? ` (${target})` : ''}`);
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
  };
  walk(plan);
  return parts.join(' > ');
}

interface Figure {
  members: number;
  medianMs: number;
  minMs: number;
  plan: string;
  explainMs: number;
  /** EXPLAIN ANALYZE of the statement as compiled without contacts.event_ids (event conditions only). */
  formerMs?: number;
}

async function measure(orm: Orm, pg: Client, projectId: string, segmentIds: string[], runs: number): Promise<Figure[]> {
  const out: Figure[] = [];
  for (const [i, { condition }] of CONDITIONS.entries()) {
    const em = orm.em.fork();
    await refreshSegmentCount(em, projectId, segmentIds[i]!); // warm-up: caches, plan
    const times: number[] = [];
    let members = 0;
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      members = (await refreshSegmentCount(orm.em.fork(), projectId, segmentIds[i]!)).memberCount;
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    // The same statement, EXPLAINed, with the parameters bound as knex binds them ($n).
    const ctx = await loadCompileContext(orm.em.fork(), projectId, [condition]);
    const compiled = compileCondition(condition, ctx);
    let n = 1;
    const text = `select count(*)::int from contacts c where c.project_id = $${n++} and (${compiled.sql.replace(/\\\?|\?/g, (m) => (m === '\\?' ? '?' : `$${n++}`))})`;
    const explained = await pg.query<{ 'QUERY PLAN': [{ Plan: Record<string, unknown>; 'Execution Time': number }] }>(
      `explain (analyze, format json) ${text}`,
      [projectId, ...compiled.params],
    );
    const root = explained.rows[0]!['QUERY PLAN'][0];
    // Event filters as compiled before contacts.event_ids (a lookup in events per contact), for comparison.
    let formerMs: number | undefined;
    if (ctx.eventIds && ctx.eventIds.size > 0) {
      const former = compileCondition(condition, { ...ctx, eventIds: undefined });
      let m = 1;
      const formerText = `select count(*)::int from contacts c where c.project_id = $${m++} and (${former.sql.replace(/\\\?|\?/g, (x) => (x === '\\?' ? '?' : `$${m++}`))})`;
      const formerPlan = await pg.query<{ 'QUERY PLAN': [{ 'Execution Time': number }] }>(`explain (analyze, format json) ${formerText}`, [projectId, ...former.params]);
      formerMs = formerPlan.rows[0]!['QUERY PLAN'][0]['Execution Time'];
    }
    out.push({
      members,
      medianMs: times[Math.floor(times.length / 2)]!,
      minMs: times[0]!,
      plan: outline(root.Plan),
      explainMs: root['Execution Time'],
      formerMs,
    });
    log(`${CONDITIONS[i]!.label}: ${members.toLocaleString('en')} members, median ${times[Math.floor(times.length / 2)]!.toFixed(0)} ms`);
  }
  return out;
}

async function main(): Promise<void> {
  const opts = options();
  const adminUrl = process.env.BENCH_POSTGRES_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const db = await createBenchDatabase(adminUrl);
  let orm: Orm | undefined;
  const pg = new Client({ connectionString: db.url });
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    log('interrupted: cleaning up after the current step');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const checkpoint = () => {
    if (interrupted) throw new Error('interrupted');
  };
  try {
    orm = await createOrm(db.url);
    await migrate(orm);
    await pg.connect();
    log(`database ${db.name} created and migrated`);
    const project = await createProject(orm.em.fork(), 'bench');
    const otherProject = await createProject(orm.em.fork(), 'bench other');
    checkpoint();

    // Without the segment indexes first: data loads faster, and these are the "before" figures.
    for (const name of Object.keys(SEGMENT_INDEXES)) await pg.query(`drop index ${name}`);
    await generate(pg, project.id, otherProject.id, opts.contacts);
    checkpoint();
    const segmentIds: string[] = [];
    for (const c of CONDITIONS) segmentIds.push((await createSegment(orm.em.fork(), project.id, { name: c.label, type: 'DYNAMIC', condition: c.condition })).id);
    const loadAtStart = os.loadavg().map((l) => l.toFixed(2)).join(' / ');
    log('timing without the segment indexes');
    const before = await measure(orm, pg, project.id, segmentIds, opts.runs);
    checkpoint();

    const indexTimes: string[] = [];
    for (const [name, ddl] of Object.entries(SEGMENT_INDEXES)) {
      const t0 = performance.now();
      await pg.query(ddl);
      indexTimes.push(`${name} ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
    await pg.query('vacuum analyze contacts, events');
    log('timing with them');
    const withIndexes = await measure(orm, pg, project.id, segmentIds, opts.runs);
    checkpoint();

    // What the prepareFieldSlots workflow does once the segments are saved.
    const slotStart = performance.now();
    const { prepared } = await prepareFieldSlots(orm.em.fork(), project.id);
    const slotSeconds = (performance.now() - slotStart) / 1000;
    log(`field slots ${prepared.join(', ')}: ${slotSeconds.toFixed(1)} s`);
    // The back-fill wrote every contact once more; VACUUM FULL stands for a settled table again.
    await timed('vacuum full contacts', () => pg.query('vacuum full contacts'));
    await pg.query('vacuum analyze contacts');
    log('timing with the field slots');
    const after = await measure(orm, pg, project.id, segmentIds, opts.runs);
    checkpoint();

    const size = await pg.query<{ contacts: string; events: string; data_gin: string }>(
      `select pg_size_pretty(pg_total_relation_size('contacts')) as contacts, pg_size_pretty(pg_total_relation_size('events')) as events,
              pg_size_pretty(pg_relation_size('contacts_data_gin')) as data_gin`,
    );
    const events = await pg.query<{ n: string }>('select count(*) as n from events');
    log('timing event inserts with and without the event-name trigger');
    const writeCost = await eventInsertCost(pg, project.id, opts.contacts);
    log('timing contact inserts with and without the slot trigger');
    const contactWriteCost = await contactInsertCost(pg, project.id);
    const lines = [
      '',
      `Segment member counts over ${opts.contacts.toLocaleString('en')} contacts of one project (+${Math.floor(opts.contacts / 20).toLocaleString('en')} in another), ${Number(events.rows[0]!.n).toLocaleString('en')} events`,
      `contacts ${size.rows[0]!.contacts}, events ${size.rows[0]!.events} (with indexes); ${opts.runs} timed runs after a warm-up, milliseconds for refreshSegmentCount (compile + count)`,
      '',
      `| condition | members | without segment indexes: median (min) | with them, data read as JSON | with them and the field slots | EXPLAIN ANALYZE with slots | plan with slots |`,
      `|---|---:|---:|---:|---:|---:|---|`,
      ...CONDITIONS.map(
        (c, i) =>
          `| ${c.label} | ${after[i]!.members.toLocaleString('en')} | ${before[i]!.medianMs.toFixed(0)} (${before[i]!.minMs.toFixed(0)}) | ${withIndexes[i]!.medianMs.toFixed(0)} (${withIndexes[i]!.minMs.toFixed(0)}) | ${after[i]!.medianMs.toFixed(0)} (${after[i]!.minMs.toFixed(0)}) | ${after[i]!.explainMs.toFixed(0)} | ${after[i]!.plan} |`,
      ),
      '',
      'Plans without the segment indexes:',
      ...CONDITIONS.map((c, i) => `  ${c.label}: ${before[i]!.plan} (EXPLAIN ANALYZE ${before[i]!.explainMs.toFixed(0)} ms)`),
      'Plans with them, data read as JSON:',
      ...CONDITIONS.map((c, i) => `  ${c.label}: ${withIndexes[i]!.plan} (EXPLAIN ANALYZE ${withIndexes[i]!.explainMs.toFixed(0)} ms)`),
      `Field slots (${prepared.join(', ')}): assigned and back-filled in ${slotSeconds.toFixed(1)} s`,
      'Event conditions compiled as before contacts.event_ids (a lookup in events per contact), EXPLAIN ANALYZE with the segment indexes:',
      ...CONDITIONS.flatMap((c, i) => (after[i]!.formerMs === undefined ? [] : [`  ${c.label}: ${after[i]!.formerMs!.toFixed(0)} ms`])),
      `Index builds: ${indexTimes.join(', ')}`,
      writeCost,
      contactWriteCost,
      environmentLine(db.serverVersion),
      `Load average (1/5/15 min) at the start of the timings ${loadAtStart}, at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}`,
      '',
    ];
    process.stdout.write(lines.join('\n'));
    // Same members every way (time-relative conditions move with the clock).
    for (const [i, c] of CONDITIONS.entries()) {
      const counts = [before[i]!.members, withIndexes[i]!.members, after[i]!.members];
      if (!JSON.stringify(c.condition).includes('ithin') && new Set(counts).size > 1) {
        throw new Error(`${c.label}: ${counts.join(' / ')} members without the indexes / with them / with the slots`);
      }
    }
  } finally {
    await pg.end().catch(() => undefined);
    await orm?.close().catch(() => undefined);
    if (opts.keep) {
      log(`kept database ${db.name}: ${db.url}`);
    } else {
      await db.drop().then(
        () => log(`dropped database ${db.name}`),
        (err: unknown) => log(`could not drop ${db.name}: ${(err as Error).message}`),
      );
    }
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
