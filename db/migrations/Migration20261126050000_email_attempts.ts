import { Migration } from '@mikro-orm/migrations';

/**
 * What GET /emails/:id needs to explain an email that is late: how many times it was handed to
 * the relay and when last (the relay's last answer is `smtp_response`, the failure `error`), and
 * the last open and click beside the first ones kept since the tracking migration. Emails written
 * before this count 0 attempts and have no last open or click: nothing recorded them.
 */
export class Migration20261126050000_email_attempts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table emails
        add column attempts integer not null default 0,
        add column last_attempt_at timestamptz,
        add column last_opened_at timestamptz,
        add column last_clicked_at timestamptz;`);
  }

  override async down(): Promise<void> {
    this.addSql(`
      alter table emails
        drop column if exists attempts, drop column if exists last_attempt_at,
        drop column if exists last_opened_at, drop column if exists last_clicked_at;`);
  }
}
