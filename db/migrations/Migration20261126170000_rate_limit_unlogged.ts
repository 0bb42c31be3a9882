import { Migration } from '@mikro-orm/migrations';

/**
 * Rate-limit windows become an unlogged table. Every API request increments its project's row,
 * and concurrent requests queue on that row's lock until the holder commits; with a logged table
 * each commit waits for its WAL flush (about 2.5 ms here), which capped one project at a few
 * hundred requests per second. A transaction that changes only unlogged tables commits without
 * that wait. The cost: a PostgreSQL crash empties the table, i.e. the current minute's counts
 * start again, which a one-minute limit can afford.
 */
export class Migration20261126170000_rate_limit_unlogged extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table rate_limit_windows set unlogged;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table rate_limit_windows set logged;');
  }
}
