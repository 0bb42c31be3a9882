import { Migration } from '@mikro-orm/migrations';

/** CSV import jobs: the uploaded file is kept here (never in a Temporal payload) with the job's counters. */
export class Migration20261125070000_imports extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table import_jobs (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        status text not null default 'queued' check (status in ('queued','running','completed','failed')),
        file bytea,
        total_rows integer not null default 0,
        processed_rows integer not null default 0,
        imported integer not null default 0,
        updated integer not null default 0,
        skipped integer not null default 0,
        errors jsonb not null default '[]'::jsonb,
        failure_reason text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql('create index import_jobs_project on import_jobs (project_id, created_at);');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists import_jobs cascade;');
  }
}
