import { Migration } from '@mikro-orm/migrations';

/**
 * The delivery engine claims QUEUED emails project by project (db/messages/delivery-queue.ts): it
 * finds the projects with queued mail by a skip scan of this index, one probe each, and reads each
 * project's oldest from it. It replaces emails_queued (queue, created_at), which only that claim read.
 */
export class Migration20261202010000_fair_claims extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index emails_queued_project on emails (queue, project_id, created_at) where status = 'QUEUED' and queue is not null;`);
    this.addSql('drop index if exists emails_queued;');
  }

  override async down(): Promise<void> {
    this.addSql(`create index emails_queued on emails (queue, created_at) where status = 'QUEUED' and queue is not null;`);
    this.addSql('drop index if exists emails_queued_project;');
  }
}
