import { Migration } from '@mikro-orm/migrations';

export class Migration20261125010000_sending extends Migration {
  override async up(): Promise<void> {
    // A domain belongs to one project in the whole instance, hence the global unique index.
    this.addSql(`
      create table domains (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        domain text not null unique check (domain = lower(domain)),
        status text not null default 'pending' check (status in ('pending','verified')),
        dkim_selector text not null,
        dkim_private_key text not null,
        dkim_public_key text not null,
        last_check jsonb,
        last_checked_at timestamptz,
        verified_at timestamptz,
        created_at timestamptz not null default now()
      );`);
    this.addSql('create index domains_project on domains (project_id, id);');
    this.addSql(`
      create table templates (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        name text not null,
        description text,
        subject text not null,
        body text not null,
        from_email text,
        from_name text,
        reply_to text,
        type text not null default 'TRANSACTIONAL' check (type in ('MARKETING','TRANSACTIONAL')),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql('create index templates_project on templates (project_id, id);');
    this.addSql(`
      create table events (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        contact_id text references contacts(id) on delete cascade,
        name text not null,
        data jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now()
      );`);
    this.addSql('create index events_project on events (project_id, id);');
    this.addSql('create index events_contact on events (contact_id, id);');
    this.addSql('create index events_name on events (project_id, name, id);');
    // Attachments are stored once per request and shared by its recipients' emails.
    this.addSql(`
      create table attachment_sets (
        id uuid primary key,
        project_id text not null references projects(id) on delete cascade,
        files jsonb not null,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`
      create table emails (
        id uuid primary key,
        project_id text not null references projects(id) on delete cascade,
        contact_id text references contacts(id) on delete set null,
        domain_id text references domains(id) on delete set null,
        template_id text,
        source text not null check (source in ('transactional','campaign','workflow')),
        marketing boolean not null default false,
        to_email text not null,
        to_name text,
        from_email text not null,
        from_name text,
        reply_to text,
        subject text not null,
        body text not null,
        headers jsonb not null default '{}'::jsonb,
        attachment_set_id uuid references attachment_sets(id) on delete set null,
        status text not null default 'QUEUED' check (status in
          ('QUEUED','SENDING','SENT','DELIVERED','OPENED','CLICKED','BOUNCED','COMPLAINED','FAILED')),
        error text,
        smtp_response text,
        sent_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql('create index emails_project on emails (project_id, created_at);');
    this.addSql('create index emails_contact on emails (contact_id);');
    this.addSql(`
      create table idempotency_keys (
        project_id text not null references projects(id) on delete cascade,
        scope text not null,
        key text not null,
        request_hash text not null,
        response_status integer,
        response_body jsonb,
        created_at timestamptz not null default now(),
        primary key (project_id, scope, key)
      );`);
    // Instance-wide secrets generated on first use (token signing when JWT_SECRET is unset).
    this.addSql(`
      create table app_secrets (
        name text primary key,
        value text not null,
        created_at timestamptz not null default now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists app_secrets, idempotency_keys, emails, attachment_sets, events, templates, domains;');
  }
}
