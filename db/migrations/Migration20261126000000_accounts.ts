import { Migration } from '@mikro-orm/migrations';

/** Users and sessions, project membership, project status, billing caps, uploads, system mail. */
export class Migration20261126000000_accounts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table users (
        id text primary key,
        email text not null unique,
        password_hash text not null,
        name text,
        email_verified_at timestamptz,
        -- Bumped when the password changes: sessions carry it, so older sessions stop working.
        session_version integer not null default 1,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint users_email_lower check (email = lower(email))
      );`);
    // Only the SHA-256 of a token is kept; the token itself exists in the email alone.
    this.addSql(`
      create table user_tokens (
        token_hash text primary key,
        user_id text not null references users(id) on delete cascade,
        purpose text not null check (purpose in ('verify-email','reset-password')),
        expires_at timestamptz not null,
        used_at timestamptz,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`create index user_tokens_user on user_tokens (user_id, purpose);`);
    this.addSql(`
      create table project_members (
        project_id text not null references projects(id) on delete cascade,
        user_id text not null references users(id) on delete cascade,
        role text not null check (role in ('OWNER','ADMIN','MEMBER')),
        created_at timestamptz not null default now(),
        primary key (project_id, user_id)
      );`);
    this.addSql(`create unique index project_members_one_owner on project_members (project_id) where role = 'OWNER';`);
    this.addSql(`create index project_members_user on project_members (user_id);`);

    this.addSql(`alter table projects add column disabled_reason text, add column disabled_at timestamptz;`);
    this.addSql(`
      create table project_suspensions (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        reason text not null,
        details jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now(),
        lifted_at timestamptz
      );`);
    this.addSql(`create index project_suspensions_project on project_suspensions (project_id, created_at desc);`);

    this.addSql(`
      create table billing_limits (
        project_id text not null references projects(id) on delete cascade,
        category text not null check (category in ('transactional','campaign','workflow')),
        monthly_limit integer not null check (monthly_limit >= 0),
        primary key (project_id, category)
      );`);
    this.addSql(`
      create table billing_accounts (
        project_id text primary key references projects(id) on delete cascade,
        provider text not null,
        customer_id text not null unique,
        subscription_id text,
        subscription_status text,
        -- The provider's time of the event that set the status: webhooks arrive in any order.
        subscription_status_at timestamptz,
        updated_at timestamptz not null default now()
      );`);
    // Consumption per category and month is counted from emails (db/billing/allowance.ts COUNTED): partial on
    // the same predicate, so the count is an index-only scan over the project's month alone.
    this.addSql(`create index emails_billing_usage on emails (project_id, source, created_at)
      where error is distinct from 'BILLING_LIMIT_EXCEEDED';`);

    this.addSql(`
      create table uploads (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        storage_key text not null unique,
        content_type text not null,
        size_bytes integer not null,
        created_at timestamptz not null default now()
      );`);

    // Account mail (verification, password reset): the body stays here, out of workflow history.
    this.addSql(`
      create table system_emails (
        id text primary key,
        to_email text not null,
        subject text not null,
        text_body text not null,
        html_body text not null,
        created_at timestamptz not null default now(),
        sent_at timestamptz
      );`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists system_emails, uploads, billing_accounts, billing_limits, project_suspensions,
      project_members, user_tokens, users cascade;`);
    this.addSql(`drop index if exists emails_billing_usage;`);
    this.addSql(`alter table projects drop column if exists disabled_reason, drop column if exists disabled_at;`);
  }
}
