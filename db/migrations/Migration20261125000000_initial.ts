import { Migration } from '@mikro-orm/migrations';

export class Migration20261125000000_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table projects (
        id text primary key,
        name text not null,
        secret_key_hash text not null unique,
        public_key_hash text not null unique,
        secret_key_preview text not null,
        public_key_preview text not null,
        disabled boolean not null default false,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql(`
      create table contacts (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        email text not null,
        subscribed boolean not null,
        data jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint contacts_email_lower check (email = lower(email))
      );`);
    this.addSql(`create unique index contacts_project_email on contacts (project_id, email);`);
    // Keyset pagination walks (project_id, id desc); the GIN index serves "has key" and field deletes.
    this.addSql(`create index contacts_project_id_id on contacts (project_id, id);`);
    this.addSql(`create index contacts_data_gin on contacts using gin (data);`);
    this.addSql(`
      create table contact_fields (
        project_id text not null references projects(id) on delete cascade,
        key text not null,
        type text not null check (type in ('string','number','boolean','date')),
        created_at timestamptz not null default now(),
        primary key (project_id, key)
      );`);
    // Fixed one-minute windows shared by every API process (see docs/design.md, Rate limiting).
    this.addSql(`
      create table rate_limit_windows (
        project_id text not null,
        window_start timestamptz not null,
        count integer not null,
        primary key (project_id, window_start)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists rate_limit_windows, contact_fields, contacts, projects cascade;');
  }
}
