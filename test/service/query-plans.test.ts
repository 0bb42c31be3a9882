import { escapeLiteral, Pool } from 'pg';
import { contactUpsertCtes } from '../../db/contacts/contacts';
import { newId } from '../../db/ids';
import { RECIPIENT_PAGE } from '../../db/campaigns/send';
import { sentMarkStatement } from '../../db/messages/delivery-queue';
import { factsStatement } from '../../db/messages/send';
import { insertRowsStatement } from '../../db/messages/prepare';
import { createOrm, migrate, type Orm } from '../../db/orm';
import { createProject } from '../../db/projects/projects';
import { query, transaction } from '../../db/sql';

/**
 * The hot paths' statements read rows by their keys however stale the planner's statistics are.
 * A new deployment's tables were ANALYZEd when nearly empty and then grow many times over before
 * autovacuum looks again; a join against an `unnest` (guessed at 10 rows) then planned a scan of
 * the whole table on every /v1/send (measured: 0.6–3.5 ms a statement at a few thousand rows).
 * Its own database, so the statistics are the ones this test makes.
 */

const admin = new URL(process.env.TEST_DATABASE_URL!);
admin.pathname = '/postgres';
const name = `tidings_plans_${Date.now()}`;
let orm: Orm;
let projectId: string;
const campaignId = newId('cmp');

beforeAll(async () => {
  const adminDb = new Pool({ connectionString: admin.toString(), max: 1 });
  await adminDb.query(`create database ${name}`);
  await adminDb.end();
  const url = new URL(admin.toString());
  url.pathname = `/${name}`;
  orm = await createOrm(url.toString());
  await migrate(orm);
  const em = orm.em.fork();
  projectId = (await createProject(em, 'plans')).id;
  await query(em, `insert into campaigns (id, project_id, name, subject, body, from_email) values (?, ?, 'c', 's', 'b', 'a@example.org')`, [
    campaignId,
    projectId,
  ]);
  // Statistics taken while the tables are small, then fifteen times the rows.
  await grow(em, 100);
  await query(em, 'analyze contacts, emails, campaign_recipients');
  await grow(em, 1500);
}, 60_000);

afterAll(async () => {
  await orm?.close();
  const adminDb = new Pool({ connectionString: admin.toString(), max: 1 });
  await adminDb.query(`drop database if exists ${name} with (force)`);
  await adminDb.end();
});

async function grow(em: ReturnType<Orm['em']['fork']>, n: number): Promise<void> {
  const tag = newId('cnt');
  await query(
    em,
    `insert into contacts (id, project_id, email, subscribed) select ? || g, ?, ? || g || '@example.org', true from generate_series(1, ?) g`,
    [tag, projectId, tag, n],
  );
  await query(
    em,
    `insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, status, sent_at, source_key)
     select gen_random_uuid(), ?, ? || g, 'transactional', ? || g || '@example.org', 'a@example.org', 's', 'b', 'SENT', now(), ? || g
     from generate_series(1, ?) g`,
    [projectId, tag, tag, `${tag}:`, n],
  );
  // Each contact a recipient of the campaign: a snapshot the statistics do not know yet.
  await query(em, `insert into campaign_recipients (campaign_id, contact_id) select ?, ? || g from generate_series(1, ?) g`, [campaignId, tag, n]);
}

const arrayText = (items: unknown[]) =>
  `{${items.map((v) => (v === null ? 'NULL' : `"${String(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`)).join(',')}}`;

/**
 * The statement as PREPARE takes it, and its parameters as EXECUTE's arguments: literals (a utility
 * statement takes no bound parameters), their types from the casts.
 */
function preparable(sql: string, params: unknown[]): { text: string; args: string } {
  let n = 0;
  const text = sql.replace(/\?/g, () => `$${++n}`);
  const args = params.map((p) => (p === null ? 'null' : escapeLiteral(Array.isArray(p) ? arrayText(p) : String(p))));
  return { text, args: args.join(', ') };
}

/**
 * The plan the service runs: its statements are prepared (db/sql.ts), and PostgreSQL soon plans a
 * prepared statement once for any parameters (a generic plan), so the arrays' lengths are unknown.
 */
async function plan(sql: string, params: unknown[]): Promise<string> {
  const { text, args } = preparable(sql, params);
  return transaction(orm.em.fork(), async (tx) => {
    await query(tx, 'set local plan_cache_mode = force_generic_plan');
    await query(tx, `prepare plan_probe as ${text}`);
    try {
      const rows = await query<{ 'QUERY PLAN': string }>(tx, `explain execute plan_probe(${args})`);
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await query(tx, 'deallocate plan_probe');
    }
  });
}

/**
 * How PostgreSQL planned `runs` executions of the statement, prepared as the service prepares it
 * (plan_cache_mode auto): five custom plans, then the generic one for good if it costs no more.
 */
async function planKinds(sql: string, params: unknown[], runs: number): Promise<{ generic: number; custom: number }> {
  const { text, args } = preparable(sql, params);
  return transaction(orm.em.fork(), async (tx) => {
    await query(tx, `prepare kinds_probe as ${text}`);
    try {
      for (let i = 0; i < runs; i++) await query(tx, `execute kinds_probe(${args})`);
      const [row] = await query<{ generic: number; custom: number }>(
        tx,
        `select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements where name = 'kinds_probe'`,
      );
      return row!;
    } finally {
      await query(tx, 'deallocate kinds_probe');
    }
  });
}

test("/v1/send's read of sender facts and contacts looks each up by its key, and is not planned again on every call", async () => {
  const items = ['someone@example.org', 'other@example.org'].map((email) => ({ projectId, domain: 'example.org', email }));
  const { sql, params } = factsStatement(items);
  const text = await plan(sql, params);
  expect(text).not.toMatch(/Seq Scan on (contacts|domains)/);
  expect(text).toMatch(/contacts_project_email on contacts/);
  expect(await planKinds(sql, params, 8)).toEqual({ generic: 3, custom: 5 });
});

test("the contact upsert (/v1/send, /v1/track) reads the existing contacts through (project_id, email)", async () => {
  const emails = ['someone@example.org', 'other@example.org'];
  const { sql, params } = contactUpsertCtes(
    emails.map((email) => ({ projectId, email, data: { plan: 'pro' }, subscribedWhenNew: false })),
    { recordChanges: true },
  );
  const text = await plan(`${sql} select * from up`, params);
  expect(text).not.toMatch(/Seq Scan on contacts/);
  expect(text).toMatch(/Index Scan using contacts_project_email on contacts/);
});

test('the SENT mark finds its emails by primary key', async () => {
  const { sql, params } = sentMarkStatement([
    { emailId: '0192f0a0-0000-7000-8000-000000000001', smtpResponse: '250 ok' },
    { emailId: '0192f0a0-0000-7000-8000-000000000002', smtpResponse: '250 ok' },
  ]);
  const text = await plan(sql, params);
  expect(text).not.toMatch(/Seq Scan on emails/);
  expect(text).toMatch(/emails_pkey/);
});

test('a batch of email rows looks up the rows already written under its source keys one by one', async () => {
  const row = { id: '0192f0a0-0000-7000-8000-000000000003', project_id: projectId, source: 'campaign', to_email: 'x@example.org', from_email: 'a@example.org', subject: 's', body: 'b', source_key: 'k' };
  const text = await plan(insertRowsStatement(true), [JSON.stringify([row])]);
  expect(text).not.toMatch(/Seq Scan on emails/);
  expect(text).toMatch(/Index Scan using emails_source_key on emails/);
});

test("a campaign's recipient page is cut before its contacts are read", async () => {
  const lines = (await plan(RECIPIENT_PAGE, [campaignId, '', 100])).split('\n');
  const indent = (l: string) => l.search(/\S/);
  const limit = lines.findIndex((l) => /Limit/.test(l));
  expect(limit).toBeGreaterThan(0);
  // What the limit reads from (the lines indented under it): recipients only. Before, the limit
  // was the top node and every recipient after the cursor was joined with its contact under it.
  const end = lines.findIndex((l, i) => i > limit && indent(l) <= indent(lines[limit]!));
  const underLimit = lines.slice(limit + 1, end < 0 ? undefined : end).join('\n');
  expect(underLimit).toMatch(/campaign_recipients/);
  expect(underLimit).not.toMatch(/contacts/);
});
