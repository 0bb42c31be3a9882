import { randomUUID } from 'node:crypto';
import { claimDueEmails } from '../../db/messages/delivery-queue';
import { MarkStatements } from '../../temporal/delivery/sent-marks';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * The delivery engines of one worker process write their SENT marks in shared statements
 * (temporal/delivery/sent-marks.ts MarkStatements). Rows written by one statement share its transaction id
 * (`xmin`), which tells how many statements did the work. No worker runs here, and the emails sit
 * in queues of their own, so nothing else claims them.
 */

let env: TestEnv;
let project: ProjectWithKeys;

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('engine statements');
}, 60_000);

afterAll(() => env?.close());

async function queueEmails(queue: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => randomUUID());
  for (const [i, id] of ids.entries()) {
    // One by one, a millisecond apart: the claim takes the oldest first.
    await query(
      env.orm.em.fork(),
      `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, queue, created_at)
       values (?, ?, 'transactional', ?, 'a@engine-statements.test', 'S', 'B', 'QUEUED', ?, now() + make_interval(secs => ?))`,
      [id, project.id, `r${i}@example.org`, queue, i / 1000],
    );
  }
  return ids;
}

const rowsOf = (ids: string[]) =>
  query<{ id: string; status: string; attempts: number; tx: string }>(
    env.orm.em.fork(),
    'select id, status, attempts, xmin::text as tx from emails where id = any(?::uuid[]) order by created_at',
    [ids],
  );

test('concurrent SENT marks share one statement, each email once with its event', async () => {
  const queue = `engine-statements-${randomUUID().slice(0, 8)}`;
  const ids = await queueEmails(queue, 5);
  const statements = new MarkStatements(env.orm.em.fork());
  await claimDueEmails(env.orm.em.fork(), queue, 5, 60);
  const claimTx = (await rowsOf(ids))[0]!.tx;

  const mark = (emailIds: string[]) => statements.write(emailIds.map((emailId) => ({ emailId, smtpResponse: `250 ok ${emailId}` })));
  await Promise.all([mark(ids.slice(0, 2)), mark(ids.slice(2)), mark([])]);

  const rows = await rowsOf(ids);
  expect(rows.map((r) => r.status)).toEqual(ids.map(() => 'SENT'));
  const txs = new Set(rows.map((r) => r.tx));
  expect(txs.size).toBe(1);
  expect(txs.has(claimTx)).toBe(false);
  const events = await query<{ email_id: string }>(
    env.orm.em.fork(),
    `select data->>'emailId' as email_id from events where name = 'email.sent' and data->>'emailId' = any(?::text[])`,
    [ids],
  );
  expect(events.map((e) => e.email_id).sort()).toEqual([...ids].sort());

  // A mark repeated (a write retried after a cut connection) changes nothing.
  await mark(ids.slice(0, 1));
  expect((await rowsOf(ids)).map((r) => r.tx)).toEqual(rows.map((r) => r.tx));
});
