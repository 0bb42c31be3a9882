import { randomUUID } from 'node:crypto';
import { EngineStatements } from '../../db/messages/engine-statements';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * The delivery engines of one worker process claim and mark in shared statements
 * (db/messages/engine-statements.ts). Rows written by one statement share its transaction id
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

test('concurrent claims share one statement, each gets at most its limit, oldest first, no email twice', async () => {
  const queue = `engine-statements-${randomUUID().slice(0, 8)}`;
  const ids = await queueEmails(queue, 6);
  const statements = new EngineStatements(env.orm.em.fork());
  const claim = async (limit: number) => (await statements.claim({ queue, limit, leaseSeconds: 60, which: 'queued' })).emails;

  const [a, b, c] = await Promise.all([claim(4), claim(4), claim(4)]);
  expect(a.map((e) => e.email.id)).toEqual(ids.slice(0, 4));
  expect(b.map((e) => e.email.id)).toEqual(ids.slice(4));
  expect(c).toEqual([]);

  const rows = await rowsOf(ids);
  expect(rows.map((r) => [r.status, r.attempts])).toEqual(ids.map(() => ['SENDING', 1]));
  expect(new Set(rows.map((r) => r.tx)).size).toBe(1);

  // Nothing left to claim, and a limit of 0 asks PostgreSQL nothing.
  expect(await claim(4)).toEqual([]);
  expect(await claim(0)).toEqual([]);
});

test('requests for different queues in one batch each get their own queue’s emails', async () => {
  const [q1, q2] = [`engine-statements-${randomUUID().slice(0, 8)}`, `engine-statements-${randomUUID().slice(0, 8)}`];
  const [ids1, ids2] = [await queueEmails(q1, 2), await queueEmails(q2, 3)];
  const statements = new EngineStatements(env.orm.em.fork());

  const [one, two] = await Promise.all([
    statements.claim({ queue: q1, limit: 10, leaseSeconds: 60, which: 'queued' }),
    statements.claim({ queue: q2, limit: 10, leaseSeconds: 60, which: 'queued' }),
  ]);
  expect(one.emails.map((e) => e.email.id)).toEqual(ids1);
  expect(two.emails.map((e) => e.email.id)).toEqual(ids2);
});

test('concurrent SENT marks share one statement, each email once with its event', async () => {
  const queue = `engine-statements-${randomUUID().slice(0, 8)}`;
  const ids = await queueEmails(queue, 5);
  const statements = new EngineStatements(env.orm.em.fork());
  await statements.claim({ queue, limit: 5, leaseSeconds: 60, which: 'queued' });
  const claimTx = (await rowsOf(ids))[0]!.tx;

  const mark = (emailIds: string[]) => statements.markSent(emailIds.map((emailId) => ({ emailId, smtpResponse: `250 ok ${emailId}` })));
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
