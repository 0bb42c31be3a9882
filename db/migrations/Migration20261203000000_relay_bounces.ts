import { Migration } from '@mikro-orm/migrations';

/**
 * Emails the relay refused for good (a hard bounce with no sent_at): the sending-reputation rule
 * counts them as sent (db/projects/security.ts), after every bounce and complaint, and reads the
 * accepted ones through emails_project_sent.
 */
export class Migration20261203000000_relay_bounces extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index emails_project_refused on emails (project_id, bounced_at) where sent_at is null and bounced_at is not null;');
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists emails_project_refused;');
  }
}
