import { Migration } from '@mikro-orm/migrations';

/**
 * Test runs of a journey (POST /workflows/:id/test-runs): executions with `test` set, their
 * timers divided by `time_scale` (1 for every other execution). A test run is not an entry of its
 * contact, so the one-active-execution index leaves it out: it neither blocks nor is blocked by
 * the contact's real executions. `temporal_run_id` is the run of the execution's Temporal workflow,
 * kept when the API started it (the Web UI link); the trigger dispatcher's starts leave it null.
 */
export class Migration20261205000000_execution_test_runs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table workflow_executions add column test boolean not null default false,
      add column time_scale double precision not null default 1,
      add column temporal_run_id text;`);
    this.addSql('drop index workflow_executions_one_active;');
    this.addSql(`create unique index workflow_executions_one_active on workflow_executions (workflow_id, contact_id)
      where status in ('RUNNING','WAITING') and not test;`);
  }

  override async down(): Promise<void> {
    this.addSql('delete from workflow_executions where test;');
    this.addSql('drop index if exists workflow_executions_one_active;');
    this.addSql(`create unique index workflow_executions_one_active on workflow_executions (workflow_id, contact_id) where status in ('RUNNING','WAITING');`);
    this.addSql('alter table workflow_executions drop column if exists test, drop column if exists time_scale, drop column if exists temporal_run_id;');
  }
}
