import { MikroORM, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { entities } from './entities';
import { Migration20261125000000_initial } from './migrations/Migration20261125000000_initial';
import { Migration20261125010000_sending } from './migrations/Migration20261125010000_sending';
import { Migration20261125020000_workflows } from './migrations/Migration20261125020000_workflows';
import { Migration20261125030000_segments } from './migrations/Migration20261125030000_segments';
import { Migration20261125040000_campaigns } from './migrations/Migration20261125040000_campaigns';
import { Migration20261125050000_tracking } from './migrations/Migration20261125050000_tracking';
import { Migration20261125060000_analytics } from './migrations/Migration20261125060000_analytics';
import { Migration20261125070000_imports } from './migrations/Migration20261125070000_imports';
import { Migration20261125080000_bulk } from './migrations/Migration20261125080000_bulk';
import { Migration20261126000000_accounts } from './migrations/Migration20261126000000_accounts';
import { Migration20261126010000_campaign_scheduled_at } from './migrations/Migration20261126010000_campaign_scheduled_at';
import { Migration20261126020000_billing_carryover } from './migrations/Migration20261126020000_billing_carryover';
import { Migration20261126030000_revoked_sessions } from './migrations/Migration20261126030000_revoked_sessions';
import { Migration20261126050000_email_attempts } from './migrations/Migration20261126050000_email_attempts';
import { Migration20261126120000_delivery_outbox } from './migrations/Migration20261126120000_delivery_outbox';
import { Migration20261126170000_rate_limit_unlogged } from './migrations/Migration20261126170000_rate_limit_unlogged';
import { Migration20261127000000_contact_event_ids } from './migrations/Migration20261127000000_contact_event_ids';
import { Migration20261128000000_contact_field_slots } from './migrations/Migration20261128000000_contact_field_slots';
import { Migration20261202000000_event_path } from './migrations/Migration20261202000000_event_path';
import { Migration20261202010000_fair_claims } from './migrations/Migration20261202010000_fair_claims';
import { Migration20261203000000_relay_bounces } from './migrations/Migration20261203000000_relay_bounces';
import { Migration20261204000000_return_path } from './migrations/Migration20261204000000_return_path';
import { Migration20261205000000_execution_test_runs } from './migrations/Migration20261205000000_execution_test_runs';

export type Orm = MikroORM;

/** Listed explicitly so the same code runs from ts (tests) and compiled js (dist). */
const migrationsList = [
  { name: 'Migration20261125000000_initial', class: Migration20261125000000_initial },
  { name: 'Migration20261125010000_sending', class: Migration20261125010000_sending },
  { name: 'Migration20261125020000_workflows', class: Migration20261125020000_workflows },
  { name: 'Migration20261125030000_segments', class: Migration20261125030000_segments },
  { name: 'Migration20261125040000_campaigns', class: Migration20261125040000_campaigns },
  { name: 'Migration20261125050000_tracking', class: Migration20261125050000_tracking },
  { name: 'Migration20261125060000_analytics', class: Migration20261125060000_analytics },
  { name: 'Migration20261125070000_imports', class: Migration20261125070000_imports },
  { name: 'Migration20261125080000_bulk', class: Migration20261125080000_bulk },
  { name: 'Migration20261126000000_accounts', class: Migration20261126000000_accounts },
  { name: 'Migration20261126010000_campaign_scheduled_at', class: Migration20261126010000_campaign_scheduled_at },
  { name: 'Migration20261126020000_billing_carryover', class: Migration20261126020000_billing_carryover },
  { name: 'Migration20261126030000_revoked_sessions', class: Migration20261126030000_revoked_sessions },
  { name: 'Migration20261126050000_email_attempts', class: Migration20261126050000_email_attempts },
  { name: 'Migration20261126120000_delivery_outbox', class: Migration20261126120000_delivery_outbox },
  { name: 'Migration20261126170000_rate_limit_unlogged', class: Migration20261126170000_rate_limit_unlogged },
  { name: 'Migration20261127000000_contact_event_ids', class: Migration20261127000000_contact_event_ids },
  { name: 'Migration20261128000000_contact_field_slots', class: Migration20261128000000_contact_field_slots },
  { name: 'Migration20261202000000_event_path', class: Migration20261202000000_event_path },
  { name: 'Migration20261202010000_fair_claims', class: Migration20261202010000_fair_claims },
  { name: 'Migration20261203000000_relay_bounces', class: Migration20261203000000_relay_bounces },
  { name: 'Migration20261204000000_return_path', class: Migration20261204000000_return_path },
  { name: 'Migration20261205000000_execution_test_runs', class: Migration20261205000000_execution_test_runs },
];

/**
 * `taskQueue`: the Temporal task queue of this process, kept as the setting `tidings.task_queue` of
 * every pooled connection. A statement that records an event writes its journey triggers to that
 * queue's dispatcher (trigger_outbox.queue defaults to it: db/record-events.ts), so no caller has
 * to carry the queue; a connection without it cannot write a trigger and says so.
 */
export function ormOptions(databaseUrl: string, overrides: Partial<Options> = {}, taskQueue?: string): Options {
  const afterCreate = taskQueue
    ? (conn: { query(sql: string, params: unknown[], cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) =>
        conn.query("select set_config('tidings.task_queue', $1, false)", [taskQueue], (err) => done(err, conn))
    : undefined;
  return {
    clientUrl: databaseUrl,
    entities,
    extensions: [Migrator],
    migrations: { migrationsList, transactional: true, allOrNothing: true, silent: true },
    discovery: { disableDynamicFileAccess: true, requireEntitiesArray: true },
    // Bounded waits: with the database unreachable a query fails within 5 s (the API answers 503
    // DATABASE_UNAVAILABLE) instead of knex's default 60 s, and a connect attempt that hangs (a
    // dropped SYN) gives its pool slot back after 5 s instead of tarn's 30 s.
    debug: false,
    allowGlobalContext: false,
    ...overrides,
    pool: { min: 0, max: 20, acquireTimeoutMillis: 5000, createTimeoutMillis: 5000, ...(afterCreate ? { afterCreate } : {}), ...overrides.pool },
  };
}

export async function createOrm(databaseUrl: string, overrides: Partial<Options> = {}, taskQueue?: string): Promise<Orm> {
  return MikroORM.init(ormOptions(databaseUrl, overrides, taskQueue));
}

/**
 * Applies pending migrations. Several processes may start at once on one database (API replicas
 * without a one-shot migrate job): a session-level advisory lock lets one migrate while the
 * others wait, then find nothing left to do. Without it two of them created the same table and
 * one crashed (test/service/topology.test.ts).
 */
export async function migrate(orm: Orm): Promise<string[]> {
  const knex = orm.em.getConnection().getKnex();
  return knex.transaction(async (trx) => {
    // Held by this transaction's connection until it ends; the migrator uses connections of its own.
    await trx.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', ['tidings:migrate']);
    const done = await orm.getMigrator().up();
    return done.map((m) => m.name);
  });
}
