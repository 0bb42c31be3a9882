import request from 'supertest';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { waitUntil } from '../helpers/sending';
import { spawnWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/** CSV import end to end: multipart upload, the job row, the import workflow on a real worker. */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;
const auth = (p = project) => bearer(p.secretKey);
const http = () => env.http();

interface Job {
  jobId: string;
  status: string;
  totalRows: number;
  processedRows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: { row: number; email: string; reason: string }[];
  reason?: string;
}

async function upload(csv: string | Buffer, p = project) {
  return http()
    .post('/contacts/import')
    .set(auth(p))
    .attach('file', Buffer.isBuffer(csv) ? csv : Buffer.from(csv, 'utf8'), 'contacts.csv');
}

async function importCsv(csv: string | Buffer, p = project): Promise<Job> {
  const res = await upload(csv, p);
  if (res.status !== 202) throw new Error(`upload: ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body).toEqual({ jobId: expect.any(String), status: 'queued' });
  return waitUntil(async () => {
    const job = await http().get(`/contacts/import/${res.body.jobId}`).set(auth(p));
    expect(job.status).toBe(200);
    return ['completed', 'failed'].includes(job.body.status) ? (job.body as Job) : undefined;
  }, 30_000);
}

async function contactByEmail(email: string, p = project) {
  const rows = await query<{ data: Record<string, unknown>; subscribed: boolean }>(
    env.orm.em.fork(),
    'select data, subscribed from contacts where project_id = ? and email = ?',
    [p.id, email],
  );
  return rows;
}

async function fieldTypes(p = project): Promise<Record<string, string>> {
  const rows = await query<{ key: string; type: string }>(env.orm.em.fork(), 'select key, type from contact_fields where project_id = ?', [p.id]);
  return Object.fromEntries(rows.map((r) => [r.key, r.type]));
}

beforeAll(async () => {
  env = await startTestEnv();
  await env.startWorker();
  project = await env.project('imports');
  other = await env.project('imports other');
});

afterAll(() => env.close());

describe('typing rules and reserved columns', () => {
  let job: Job;
  beforeAll(async () => {
    job = await importCsv(
      [
        ' Email ,code,phone,sci,signedUp,vip,score,ratio,negative,zero,plain,id,subscribed,createdAt,unsubscribeUrl,flag',
        'Typing@Example.org,007,+447700900123,1e5,2024-01-31T10:00:00Z,YES,42,3.14,-7,0.5,hello,cnt_forged,false,2020-01-01,http://x,no',
      ].join('\n'),
    );
  });

  it('completes with one new contact', () => {
    expect(job).toMatchObject({ status: 'completed', totalRows: 1, processedRows: 1, imported: 1, updated: 0, skipped: 0, errors: [] });
  });

  it('types each cell by its content; reserved columns are dropped; the email is lower-cased; new contacts are subscribed', async () => {
    const [c] = await contactByEmail('typing@example.org');
    expect(c!.subscribed).toBe(true);
    expect(c!.data).toEqual({
      code: '007',
      phone: '+447700900123',
      sci: '1e5',
      signedUp: '2024-01-31T10:00:00Z',
      vip: true,
      score: 42,
      ratio: 3.14,
      negative: -7,
      zero: 0.5,
      plain: 'hello',
      flag: false,
    });
    expect(await fieldTypes()).toMatchObject({
      code: 'string',
      phone: 'string',
      sci: 'string',
      signedUp: 'date',
      vip: 'boolean',
      score: 'number',
      ratio: 'number',
      flag: 'boolean',
      plain: 'string',
    });
    const types = await fieldTypes();
    for (const reserved of ['id', 'subscribed', 'createdAt', 'unsubscribeUrl', 'email', 'Email']) expect(types[reserved]).toBeUndefined();
  });
});

describe('row errors, duplicates, merges', () => {
  it('reports missing and invalid emails with their row numbers and still completes', async () => {
    const job = await importCsv(
      ['email,name', 'good1@example.org,A', ',NoEmail', 'not-an-email,Bad', 'good2@example.org,B'].join('\r\n'),
    );
    expect(job).toMatchObject({ status: 'completed', totalRows: 4, processedRows: 4, imported: 2, updated: 0, skipped: 2 });
    expect(job.errors).toEqual([
      { row: 3, email: '', reason: 'missing_email' },
      { row: 4, email: 'not-an-email', reason: 'invalid_email' },
    ]);
  });

  it('merges two rows with the same email (counted as updated); empty cells do not erase', async () => {
    const job = await importCsv(['email,plan,city', 'dup@example.org,free,Paris', 'DUP@example.org,pro,'].join('\n'));
    expect(job).toMatchObject({ status: 'completed', imported: 1, updated: 1, skipped: 0 });
    const rows = await contactByEmail('dup@example.org');
    expect(rows).toHaveLength(1);
    expect(rows[0]!.data).toEqual({ plan: 'pro', city: 'Paris' });
  });

  it('merges into an existing contact and keeps its subscription; re-importing the same file updates in place', async () => {
    const created = await http().post('/contacts').set(auth()).send({ email: 'existing@example.org', subscribed: false, data: { keep: 'me' } });
    expect([200, 201]).toContain(created.status);
    const csv = 'email,tier\nexisting@example.org,gold\nfresh@example.org,silver\n';
    const first = await importCsv(csv);
    expect(first).toMatchObject({ status: 'completed', imported: 1, updated: 1 });
    const second = await importCsv(csv);
    expect(second).toMatchObject({ status: 'completed', imported: 0, updated: 2 });
    const [existing] = await contactByEmail('existing@example.org');
    expect(existing).toEqual({ subscribed: false, data: { keep: 'me', tier: 'gold' } });
    expect(await contactByEmail('fresh@example.org')).toHaveLength(1);
  });

  it('spans several chunks with exact counts', async () => {
    const lines = ['email,n'];
    for (let i = 0; i < 2500; i++) lines.push(`bulk${i}@example.org,${i}`);
    lines.push('bulk0@example.org,again');
    const job = await importCsv(lines.join('\n'));
    expect(job).toMatchObject({ status: 'completed', totalRows: 2501, processedRows: 2501, imported: 2500, updated: 1, skipped: 0 });
  });
});

describe('file format', () => {
  it('accepts a BOM and quoted fields with commas, quotes and newlines', async () => {
    const csv = '\uFEFFemail,address,note\n"quoted@example.org","1 Main St, Springfield","line one\nline ""two"""\n';
    const job = await importCsv(csv);
    expect(job).toMatchObject({ status: 'completed', totalRows: 1, imported: 1 });
    const [c] = await contactByEmail('quoted@example.org');
    expect(c!.data).toEqual({ address: '1 Main St, Springfield', note: 'line one\nline "two"' });
  });

  it('fails the job, saying why, without an email column', async () => {
    const job = await importCsv('name,plan\nAda,pro\n');
    expect(job.status).toBe('failed');
    expect(job.reason).toMatch(/email/);
  });

  it('refuses invalid UTF-8 with a 422', async () => {
    const res = await upload(Buffer.from([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xff, 0xfe, 0x41, 0x0a]));
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('INVALID_ENCODING');
  });

  it('refuses a file over 5 MB with a 413', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024 + 10, 'a');
    const res = await upload(big);
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('needs the form part "file" (422)', async () => {
    const res = await http().post('/contacts/import').set(auth()).field('other', 'x');
    expect(res.status).toBe(422);
  });
});

describe('isolation', () => {
  it("another project's job is a 404", async () => {
    const res = await upload('email\nmine@example.org\n');
    expect(res.status).toBe(202);
    const foreign = await http().get(`/contacts/import/${res.body.jobId}`).set(auth(other));
    expect(foreign.status).toBe(404);
    const missing = await http().get('/contacts/import/job_nope').set(auth());
    expect(missing.status).toBe(404);
  });
});

describe('a worker killed mid-import', () => {
  // Its own task queue and no in-process worker: only the child process runs this import.
  let crashEnv: TestEnv;
  let child: WorkerProcess | undefined;
  const workerEnv = (): Record<string, string> => ({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    PUBLIC_URL: 'http://localhost:3000',
    DATABASE_URL: process.env.TEST_DATABASE_URL!,
    TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS!,
    TEMPORAL_TASK_QUEUE: crashEnv.taskQueue,
    WORKFLOW_BUNDLE: process.env.TEST_WORKFLOW_BUNDLE!,
  });

  beforeAll(async () => {
    crashEnv = await startTestEnv();
  });
  afterAll(async () => {
    await child?.stop();
    await crashEnv.close();
  });

  it('resumes after the last committed chunk: 100,000 rows, exact counts', async () => {
    const p = await crashEnv.project('imports crash');
    // 90,000 distinct emails; the last 10,000 rows repeat the first 10,000 with a new value.
    const lines = ['email,n'];
    for (let i = 0; i < 100_000; i++) lines.push(`r${i % 90_000}@example.org,${i}`);
    child = await spawnWorkerProcess(workerEnv());
    const res = await request(crashEnv.app)
      .post('/contacts/import')
      .set(bearer(p.secretKey))
      .attach('file', Buffer.from(lines.join('\n')), 'big.csv');
    expect(res.status).toBe(202);
    const jobId = res.body.jobId as string;
    const progress = async () =>
      (await query<{ processed_rows: number; status: string }>(crashEnv.orm.em.fork(), 'select processed_rows, status from import_jobs where id = ?', [jobId]))[0]!;
    // Kill as soon as some chunks are committed and the import is not finished.
    await waitUntil(async () => {
      const { processed_rows } = await progress();
      return processed_rows > 0 ? true : undefined;
    }, 60_000);
    await child.kill();
    const killedAt = await progress();
    expect(killedAt.status).toBe('running');
    expect(killedAt.processed_rows).toBeLessThan(100_000);
    child = await spawnWorkerProcess(workerEnv());
    const job = await waitUntil(async () => {
      const r = await request(crashEnv.app).get(`/contacts/import/${jobId}`).set(bearer(p.secretKey));
      return r.body.status === 'completed' || r.body.status === 'failed' ? (r.body as Job) : undefined;
    }, 90_000);
    expect(job).toMatchObject({ status: 'completed', totalRows: 100_000, processedRows: 100_000, imported: 90_000, updated: 10_000, skipped: 0 });
    const [counts] = await query<{ total: number; latest: number }>(
      crashEnv.orm.em.fork(),
      `select count(*)::int as total,
              count(*) filter (where (data->>'n')::int = (case when split_part(substr(email, 2), '@', 1)::int < 10000
                 then split_part(substr(email, 2), '@', 1)::int + 90000 else split_part(substr(email, 2), '@', 1)::int end))::int as latest
       from contacts where project_id = ?`,
      [p.id],
    );
    expect(counts).toEqual({ total: 90_000, latest: 90_000 });
  }, 180_000);
});
