/**
 * CSV import benchmark: one CSV file of N rows (default 100,000, about 5 MB: email plus five typed
 * columns, a number, a boolean, an ISO date, a string and a decimal) generated in memory, imported
 * end to end through the real API,
 *
 *   POST /contacts/import (multipart, form part "file") → poll GET /contacts/import/:jobId until completed
 *
 * with a real worker (temporal/imports/activities.ts: chunks of 1,000 rows, one statement each),
 * and then, in the same run on a fresh table state (contacts truncated) and a fresh project, a raw
 * set-based load of the same rows (same normalised emails, same typed data) straight into PostgreSQL:
 *
 *   INSERT INTO contacts … SELECT FROM jsonb_to_recordset(?::jsonb) ON CONFLICT (project_id, email) DO UPDATE …
 *
 * in chunks of 1,000, one autocommitted statement each, the rows prepared beforehand (the raw rate is
 * the database's part only). Prints rows/s of both, the ratio import/raw, the environment with the
 * load average before and after, and checks the counts (imported = rows, contacts in the DB = rows).
 *
 *   npx tsx bench/import.ts [--rows 100000] [--poll-ms 50]
 *
 * Set-up and teardown are bench/harness.ts's (a fresh database dropped at the end, an in-memory
 * Temporal dev server, the API and the worker in this process).
 */
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { MAX_IMPORT_BYTES } from '../api/routes/imports';
import { planColumns, recordData } from '../db/contacts/csv-typing';
import { checkEmail, type ImportJobDto } from '../db/contacts/imports';
import { newId } from '../db/ids';
import { createProject } from '../db/projects/projects';
import { cpuSnapshot, startStack, type Interruption, runBench, type Teardown } from './harness';
import { environmentLine, log, positiveInt } from './support';

const HEADER = ['email', 'age', 'vip', 'signed_up', 'plan', 'score'];
const PLANS = ['free', 'starter', 'pro', 'team'];
const RAW_CHUNK = 1000;

function options() {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string', default: '100000' },
      'poll-ms': { type: 'string', default: '50' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: npx tsx bench/import.ts [--rows 100000] [--poll-ms 50]\n');
    process.exit(0);
  }
  return { rows: positiveInt('rows', values.rows), pollMs: positiveInt('poll-ms', values['poll-ms']) };
}

/** Row i's cells (no quoting needed: no cell holds a comma, quote or newline). */
function record(i: number): string[] {
  const day = new Date(Date.UTC(2020, 0, 1) + (i % 1500) * 86_400_000).toISOString().slice(0, 10);
  return [`c${i}@bench.test`, String(18 + (i % 70)), i % 3 === 0 ? 'true' : 'false', day, PLANS[i % PLANS.length]!, ((i % 10_000) / 100).toFixed(2)];
}

/** POST /contacts/import with `csv` as the multipart form part "file". */
function upload(port: number, key: string, csv: Buffer): Promise<{ status: number; text: string }> {
  const boundary = `----tidings-bench-${Date.now()}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="contacts.csv"\r\nContent-Type: text/csv\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const body = Buffer.concat([head, csv, tail]);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/contacts/import',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': body.length,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error('upload timed out after 60 s')));
    req.on('error', reject);
    req.end(body);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const loadavg = () => os.loadavg().map((l) => l.toFixed(2)).join(' / ');

async function main(teardown: Teardown, stop: Interruption): Promise<void> {
  const opts = options();
  // The file, and the same rows as the worker would type them (for the raw load).
  const lines = [HEADER.join(',')];
  const records: string[][] = [];
  for (let i = 1; i <= opts.rows; i++) {
    const r = record(i);
    records.push(r);
    lines.push(r.join(','));
  }
  const csv = Buffer.from(`${lines.join('\n')}\n`, 'utf8');
  if (csv.length > MAX_IMPORT_BYTES) throw new Error(`the CSV is ${csv.length} bytes, over the API's limit of ${MAX_IMPORT_BYTES}: use fewer --rows`);
  const columns = planColumns(HEADER);
  if ('error' in columns) throw new Error(columns.error);
  const prepared = records.map((r) => {
    const checked = checkEmail(r[columns.emailIndex]);
    if ('reason' in checked) throw new Error(`generated an invalid email: ${r[columns.emailIndex]}`);
    return { email: checked.email, data: recordData(columns, r).data };
  });
  log(`CSV: ${fmt(opts.rows)} rows, ${fmt(csv.length)} bytes (${(csv.length / 2 ** 20).toFixed(2)} MiB; limit ${MAX_IMPORT_BYTES})`);

  const stack = await startStack({ teardown, checkpoint: () => stop.checkpoint(), concurrency: 2 });
  const { client, orm, project, port } = stack;
  const sql = <T>(text: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(text, params);
  stop.checkpoint();

  const loadBefore = loadavg();
  const cpu0 = cpuSnapshot(stack);

  // 1. End to end through the API and the worker.
  const t0 = performance.now();
  const posted = await upload(port, project.secretKey, csv);
  const tUploaded = performance.now();
  if (posted.status !== 202) throw new Error(`POST /contacts/import: ${posted.status} ${posted.text}`);
  const jobId = (JSON.parse(posted.text) as { jobId: string }).jobId;
  log(`job ${jobId} queued after ${((tUploaded - t0) / 1000).toFixed(2)} s`);
  let job: ImportJobDto | undefined;
  let tFirstRunning: number | undefined;
  let lastLog = performance.now();
  for (;;) {
    stop.checkpoint();
    const got = await client.request('GET', `/contacts/import/${jobId}`);
    if (got.status !== 200) throw new Error(`GET /contacts/import/${jobId}: ${got.status} ${got.text}`);
    job = got.body as ImportJobDto;
    if (job.status === 'running' && tFirstRunning === undefined) tFirstRunning = performance.now();
    if (job.status === 'completed' || job.status === 'failed') break;
    if (performance.now() - lastLog > 2000) {
      lastLog = performance.now();
      log(`  ${job.status}: ${fmt(job.processedRows)} / ${fmt(job.totalRows)} rows`);
    }
    await sleep(opts.pollMs);
  }
  const tDone = performance.now();
  const cpu1 = cpuSnapshot(stack);
  if (job.status !== 'completed') throw new Error(`import job ${jobId} ${job.status}: ${job.reason ?? ''}`);
  const importSeconds = (tDone - t0) / 1000;
  const serverSeconds = (Date.parse(job.updatedAt) - Date.parse(job.createdAt)) / 1000;
  const [importedInDb] = await sql<{ n: number }>('select count(*)::int as n from contacts where project_id = ?', [project.id]);
  const fields = await sql<{ key: string; type: string }>('select key, type from contact_fields where project_id = ? order by key', [project.id]);
  log(`import completed in ${importSeconds.toFixed(2)} s; table state reset for the raw load`);

  // 2. Raw set-based load of the same rows, fresh table state (truncated: nothing else references
  //    contacts in this run) and a fresh project.
  await sql('truncate contacts cascade');
  await sql('vacuum analyze contacts');
  const rawProject = await createProject(orm.em.fork(), 'bench-raw');
  stop.checkpoint();
  const chunks: string[] = [];
  for (let i = 0; i < prepared.length; i += RAW_CHUNK) {
    chunks.push(JSON.stringify(prepared.slice(i, i + RAW_CHUNK).map((r) => ({ id: newId('cnt'), email: r.email, data: r.data }))));
  }
  const cpu2 = cpuSnapshot(stack);
  const r0 = performance.now();
  for (const chunk of chunks) {
    stop.checkpoint();
    await sql(
      `insert into contacts as c (id, project_id, email, subscribed, data)
       select r.id, ?, r.email, true, r.data from jsonb_to_recordset(?::jsonb) as r(id text, email text, data jsonb)
       on conflict (project_id, email) do update set data = c.data || excluded.data, updated_at = now()`,
      [rawProject.id, chunk],
    );
  }
  const rawSeconds = (performance.now() - r0) / 1000;
  const cpu3 = cpuSnapshot(stack);
  const [rawInDb] = await sql<{ n: number }>('select count(*)::int as n from contacts where project_id = ?', [rawProject.id]);
  const loadAfter = loadavg();

  const importRate = opts.rows / importSeconds;
  const rawRate = opts.rows / rawSeconds;
  const checks = [
    { ok: job.totalRows === opts.rows, what: `job totalRows ${job.totalRows} = rows ${opts.rows}` },
    { ok: job.imported === opts.rows, what: `imported ${job.imported} = rows ${opts.rows}` },
    { ok: job.updated === 0 && job.skipped === 0 && job.errors.length === 0, what: `updated ${job.updated}, skipped ${job.skipped}, errors ${job.errors.length} all 0` },
    { ok: importedInDb!.n === opts.rows, what: `contacts of the import's project in the DB ${importedInDb!.n} = rows ${opts.rows}` },
    { ok: rawInDb!.n === opts.rows, what: `contacts of the raw load's project in the DB ${rawInDb!.n} = rows ${opts.rows}` },
  ];
  const checkOk = checks.every((c) => c.ok);
  const cpuSpan = (a: typeof cpu0, b: typeof cpu0) =>
    `this process ${(b.node - a.node).toFixed(1)} s, Temporal ${(b.temporal - a.temporal).toFixed(1)} s, PostgreSQL backends ${(b.postgres - a.postgres).toFixed(1)} s`;

  const out = [
    '',
    `CSV import benchmark: ${fmt(opts.rows)} rows, ${fmt(csv.length)} bytes (${(csv.length / 2 ** 20).toFixed(2)} MiB), columns ${HEADER.join(', ')}`,
    `  environment   ${environmentLine(stack.db.serverVersion)}`,
    `                ${os.cpus().length} cores, node ${process.version}; load average (1/5/15 min) before ${loadBefore}, after ${loadAfter}`,
    `  import        ${importSeconds.toFixed(2)} s end to end (upload start → GET shows completed, polled every ${opts.pollMs} ms): ${fmt(importRate)} rows/s`,
    `                upload (POST answered 202) ${((tUploaded - t0) / 1000).toFixed(2)} s; first seen running at ${tFirstRunning === undefined ? 'never (completed between polls)' : `${((tFirstRunning - t0) / 1000).toFixed(2)} s`}; ` +
      `job createdAt → updatedAt ${serverSeconds.toFixed(2)} s (${fmt(opts.rows / serverSeconds)} rows/s)`,
    `                job: status ${job.status}, totalRows ${job.totalRows}, imported ${job.imported}, updated ${job.updated}, skipped ${job.skipped}, errors ${job.errors.length}`,
    `                fields registered: ${fields.map((f) => `${f.key}:${f.type}`).join(', ')}`,
    `                CPU: ${cpuSpan(cpu0, cpu1)}`,
    `  raw load      ${rawSeconds.toFixed(2)} s for ${chunks.length} statements of ≤ ${RAW_CHUNK} rows (INSERT … SELECT FROM jsonb_to_recordset ON CONFLICT DO UPDATE, ` +
      `contacts truncated first, fresh project, rows prepared beforehand): ${fmt(rawRate)} rows/s`,
    `                CPU: ${cpuSpan(cpu2, cpu3)}`,
    `  ratio         import/raw = ${(importRate / rawRate).toFixed(3)} (raw is ${(rawRate / importRate).toFixed(1)}× faster)`,
    `  checks        ${checkOk ? 'OK' : 'FAILED'}: ${checks.map((c) => `${c.ok ? 'ok' : 'FAIL'} ${c.what}`).join('; ')}`,
    '',
  ];
  process.stdout.write(out.join('\n'));
  if (!checkOk) process.exitCode = 1;
}

runBench(main);
