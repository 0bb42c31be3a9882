import { Migration } from '@mikro-orm/migrations';

/**
 * Consumption that outlives the email rows it was counted from: a project reset deletes its
 * emails, and their month's counts move here first (db/billing/allowance.ts), so a reset neither erases
 * what was consumed nor restarts the month's count against the caps.
 */
export class Migration20261126020000_billing_carryover extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table billing_carryover (
        project_id text not null references projects(id) on delete cascade,
        category text not null check (category in ('transactional','campaign','workflow')),
        month date not null,
        used integer not null default 0,
        refused integer not null default 0,
        primary key (project_id, category, month)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists billing_carryover;');
  }
}
