import { Migration } from '@mikro-orm/migrations';

/**
 * Bulk contact jobs (db/contacts/bulk-jobs.ts): written by the API, worked by the bulkContacts workflow
 * one chunk at a time. `next_offset` is the index in `ids` of the first id not yet done; it moves
 * in the same transaction as a chunk's work, so a retried chunk finds itself done.
 */
export class Migration20261125080000_bulk extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table bulk_jobs (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        operation text not null check (operation in ('subscribe','unsubscribe','delete')),
        ids jsonb not null,
        status text not null default 'queued' check (status in ('queued','running','completed','failed')),
        total integer not null,
        next_offset integer not null default 0,
        succeeded integer not null default 0,
        unchanged integer not null default 0,
        failed integer not null default 0,
        errors jsonb not null default '[]'::jsonb,
        error text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        finished_at timestamptz
      );`);
    this.addSql(`create index bulk_jobs_project on bulk_jobs (project_id, id);`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists bulk_jobs;');
  }
}
