import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { runCli } from '../helpers/service-process';

/** `tidings contacts import` as a child process, starting the workflow on this file's worker. */
jest.setTimeout(180_000);

let env: TestEnv;
let project: ProjectWithKeys;
let dir: string;

function cli(args: string[], extraEnv: Record<string, string> = {}) {
  return runCli(
    args,
    {
      ...process.env,
      DATABASE_URL: process.env.TEST_DATABASE_URL,
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: env.taskQueue,
      LOG_LEVEL: 'silent',
      ...extraEnv,
    },
    120_000,
  );
}

beforeAll(async () => {
  env = await startTestEnv();
  await env.startWorker();
  project = await env.project('cli import');
  dir = mkdtempSync(path.join(os.tmpdir(), 'tidings-cli-import-'));
});

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await env.close();
});

test('imports a CSV file, shows progress on stderr and prints the final job as JSON', async () => {
  const rows = Array.from({ length: 300 }, (_, i) => `person${i}@example.com,Person ${i}`);
  rows[150] = 'not-an-email,Broken';
  const file = path.join(dir, 'contacts.csv');
  writeFileSync(file, ['email,name', ...rows].join('\n'));

  const result = await cli(['contacts', 'import', file, '--project', project.id]);
  if (result.code !== 0) throw new Error(`CLI exited with ${result.code}\nstderr:\n${result.stderr}`);

  const job = JSON.parse(result.stdout);
  expect(Object.keys(job).sort()).toEqual(['errors', 'imported', 'jobId', 'processedRows', 'skipped', 'status', 'totalRows', 'updated']);
  expect(job).toMatchObject({ status: 'completed', totalRows: 300, processedRows: 300, imported: 299, updated: 0, skipped: 1 });
  expect(job.errors).toEqual([{ row: 152, email: 'not-an-email', reason: 'invalid_email' }]);

  // stderr is not a TTY here: one line per 10 % step, ending at 100 %.
  expect(result.stderr).toContain(`Import job ${job.jobId} queued`);
  expect(result.stderr).toMatch(/300\/300 \(100%\), imported 299, updated 0, skipped 1/);

  const [count] = await query<{ n: number }>(env.orm.em.fork(), 'select count(*)::int as n from contacts where project_id = ?', [project.id]);
  expect(count!.n).toBe(299);
  const named = await query<{ data: Record<string, unknown> }>(env.orm.em.fork(), 'select data from contacts where project_id = ? and email = ?', [
    project.id,
    'person7@example.com',
  ]);
  expect(named[0]?.data).toMatchObject({ name: 'Person 7' });
});

test('an unknown project and a missing file fail with a clear message and exit 1', async () => {
  const file = path.join(dir, 'small.csv');
  writeFileSync(file, 'email\nx@example.com\n');
  const [unknown, missing] = await Promise.all([
    cli(['contacts', 'import', file, '--project', 'prj_doesnotexist']),
    cli(['contacts', 'import', path.join(dir, 'nope.csv'), '--project', project.id]),
  ]);
  expect(unknown.code).toBe(1);
  expect(unknown.stdout).toBe('');
  expect(unknown.stderr).toContain('No project with id "prj_doesnotexist"');
  expect(unknown.stderr).not.toMatch(/\n\s+at /);

  expect(missing.code).toBe(1);
  expect(missing.stdout).toBe('');
  expect(missing.stderr).toContain(`Cannot read the CSV file "${path.join(dir, 'nope.csv')}": no such file`);
  expect(missing.stderr).not.toMatch(/\n\s+at /);
});

test('with no worker on the task queue the job stays queued: exit 2 after --timeout, naming the job', async () => {
  const file = path.join(dir, 'unserved.csv');
  writeFileSync(file, 'email\nqueued@example.com\n');
  const result = await cli(['contacts', 'import', file, '--project', project.id, '--timeout', '1'], {
    TEMPORAL_TASK_QUEUE: `${env.taskQueue}-nobody`,
  });
  expect(result.code).toBe(2);
  const job = JSON.parse(result.stdout);
  expect(job).toMatchObject({ status: 'queued', processedRows: 0 });
  expect(result.stderr).toContain(`Import job ${job.jobId} is still queued after 1 s`);
});
