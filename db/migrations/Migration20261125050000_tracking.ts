import { Migration } from '@mikro-orm/migrations';

export class Migration20261125050000_tracking extends Migration {
  override async up(): Promise<void> {
    // Engagement per email: first time and count of opens and clicks, and what the mail
    // infrastructure reported (POST /webhooks/notify). Campaign stats count these columns.
    this.addSql(`
      alter table emails
        add column delivered_at timestamptz,
        add column opened_at timestamptz,
        add column open_count integer not null default 0,
        add column clicked_at timestamptz,
        add column click_count integer not null default 0,
        add column bounced_at timestamptz,
        add column bounce_type text check (bounce_type in ('hard','soft')),
        add column complained_at timestamptz;`);
    // Notifications that carry no Message-ID of ours are matched by recipient (latest sent email).
    this.addSql('create index emails_to_email on emails (lower(to_email), sent_at desc);');
    // Addresses never mailed again in the project: hard bounces and complaints.
    this.addSql(`
      create table suppressions (
        project_id text not null references projects(id) on delete cascade,
        email text not null check (email = lower(email)),
        reason text not null check (reason in ('hard_bounce','complaint')),
        email_id uuid references emails(id) on delete set null,
        created_at timestamptz not null default now(),
        primary key (project_id, email)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists suppressions;');
    this.addSql('drop index if exists emails_to_email;');
    this.addSql(`
      alter table emails
        drop column if exists delivered_at, drop column if exists opened_at, drop column if exists open_count,
        drop column if exists clicked_at, drop column if exists click_count, drop column if exists bounced_at,
        drop column if exists bounce_type, drop column if exists complained_at;`);
  }
}
