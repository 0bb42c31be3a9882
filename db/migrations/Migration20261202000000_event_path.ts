import { Migration } from '@mikro-orm/migrations';

/**
 * Every recorded event reaches journeys through trigger_outbox (db/record-events.ts):
 * - `queue` defaults to the writing connection's `tidings.task_queue` (db/orm.ts), so statements
 *   that record events in passing (a sent mark, an open, a bulk job) need not carry it;
 * - `starts_journeys` is false for an event a journey caused (the loop rule in
 *   docs/journeys.md): it still wakes the executions waiting for it, and starts none;
 * - `workflow_executions.email_waits`: the email events an execution's WAIT_FOR_EVENT steps wait
 *   for, so the outcomes of its own emails reach it in any step (a wait takes them whenever they came).
 */
export class Migration20261202000000_event_path extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table trigger_outbox alter column queue set default current_setting('tidings.task_queue', true);`);
    this.addSql(`alter table trigger_outbox add column starts_journeys boolean not null default true;`);
    this.addSql(`alter table workflow_executions add column email_waits text[] not null default '{}';`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table workflow_executions drop column if exists email_waits;');
    this.addSql('alter table trigger_outbox drop column if exists starts_journeys;');
    this.addSql('alter table trigger_outbox alter column queue drop default;');
  }
}
