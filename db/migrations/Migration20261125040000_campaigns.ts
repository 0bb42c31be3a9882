import { Migration } from '@mikro-orm/migrations';

export class Migration20261125040000_campaigns extends Migration {
  override async up(): Promise<void> {
    // segment_id has no foreign key: the segments migration is filled by its own issue, and a
    // campaign keeps the id it was sent to even if the segment goes later (DELETE /segments/:id
    // refuses while an active campaign uses it).
    this.addSql(`
      create table campaigns (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        name text not null,
        description text,
        subject text not null,
        body text not null,
        from_email text not null,
        from_name text,
        reply_to text,
        type text not null default 'MARKETING' check (type in ('MARKETING','TRANSACTIONAL')),
        segment_id text,
        status text not null default 'DRAFT' check (status in ('DRAFT','SCHEDULED','SENDING','SENT','CANCELLED')),
        scheduled_for timestamptz,
        snapshot_at timestamptz,
        sent_at timestamptz,
        cancelled_at timestamptz,
        total_recipients integer not null default 0,
        sent_count integer not null default 0,
        error text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql('create index campaigns_project on campaigns (project_id, id);');
    // The audience, frozen when sending starts; the send walks it in contact_id order (keyset).
    this.addSql(`
      create table campaign_recipients (
        campaign_id text not null references campaigns(id) on delete cascade,
        contact_id text not null references contacts(id) on delete cascade,
        email_id uuid,
        status text not null default 'PENDING' check (status in ('PENDING','SENT','SKIPPED','FAILED')),
        primary key (campaign_id, contact_id)
      );`);
    // Serves the cascade when a contact is deleted.
    this.addSql('create index campaign_recipients_contact on campaign_recipients (contact_id);');
    // No foreign key: deleting a campaign must not rewrite its (possibly 100,000) email rows.
    this.addSql('alter table emails add column campaign_id text;');
    this.addSql('create index emails_campaign on emails (campaign_id) where campaign_id is not null;');
    // The per-project sending throttle (db/messages/send-throttle.ts): the next free send slot of the
    // project, shared by every worker; rate_per_second overrides SEND_THROTTLE_PER_SECOND.
    this.addSql(`
      create table send_throttles (
        project_id text primary key references projects(id) on delete cascade,
        next_at timestamptz not null default clock_timestamp(),
        rate_per_second double precision check (rate_per_second > 0)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists send_throttles;');
    this.addSql('drop index if exists emails_campaign; alter table emails drop column if exists campaign_id;');
    this.addSql('drop table if exists campaign_recipients, campaigns;');
  }
}
