import { Migration } from '@mikro-orm/migrations';

export class Migration20261125020000_workflows extends Migration {
  override async up(): Promise<void> {
    // Signs WEBHOOK step requests (X-Signature); per project so one leak does not expose others.
    this.addSql(`alter table projects add column webhook_secret text not null default replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');`);
    this.addSql(`
      create table workflows (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        name text not null,
        description text,
        trigger_type text not null default 'EVENT' check (trigger_type in ('EVENT')),
        trigger_config jsonb not null,
        enabled boolean not null default false,
        allow_reentry boolean not null default false,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql(`create index workflows_project on workflows (project_id, id);`);
    this.addSql(`create index workflows_trigger on workflows (project_id, (trigger_config->>'eventName')) where enabled;`);
    this.addSql(`
      create table workflow_steps (
        id text primary key,
        workflow_id text not null references workflows(id) on delete cascade,
        type text not null check (type in ('TRIGGER','SEND_EMAIL','DELAY','WAIT_FOR_EVENT','CONDITION','WEBHOOK','UPDATE_CONTACT','EXIT')),
        name text,
        config jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`create index workflow_steps_workflow on workflow_steps (workflow_id, id);`);
    this.addSql(`
      create table workflow_transitions (
        id text primary key,
        workflow_id text not null references workflows(id) on delete cascade,
        from_step_id text not null references workflow_steps(id) on delete cascade,
        to_step_id text not null references workflow_steps(id) on delete cascade,
        branch text check (branch in ('yes','no','event','timeout')),
        created_at timestamptz not null default now()
      );`);
    // One transition per branch of a step (an unlabelled one counts as its own branch).
    this.addSql(`create unique index workflow_transitions_branch on workflow_transitions (from_step_id, coalesce(branch, ''));`);
    this.addSql(`
      create table workflow_executions (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        workflow_id text not null references workflows(id) on delete cascade,
        contact_id text not null references contacts(id) on delete cascade,
        status text not null default 'RUNNING' check (status in ('RUNNING','WAITING','COMPLETED','EXITED','FAILED','CANCELLED')),
        current_step_id text,
        waiting_for_event text,
        context jsonb not null default '{}'::jsonb,
        exit_reason text,
        error text,
        started_at timestamptz not null default now(),
        finished_at timestamptz,
        updated_at timestamptz not null default now()
      );`);
    this.addSql(`create index workflow_executions_workflow on workflow_executions (workflow_id, id);`);
    this.addSql(`create index workflow_executions_contact on workflow_executions (contact_id) where status in ('RUNNING','WAITING');`);
    // allowReentry true: at most one active execution per contact and workflow.
    this.addSql(`create unique index workflow_executions_one_active on workflow_executions (workflow_id, contact_id) where status in ('RUNNING','WAITING');`);
    // allowReentry false: a contact enters at most once, ever; this row outlives the execution.
    this.addSql(`
      create table workflow_entries (
        workflow_id text not null references workflows(id) on delete cascade,
        contact_id text not null references contacts(id) on delete cascade,
        entered_at timestamptz not null default now(),
        primary key (workflow_id, contact_id)
      );`);
    this.addSql(`
      create table execution_steps (
        execution_id text not null references workflow_executions(id) on delete cascade,
        seq integer not null,
        step_id text not null,
        step_type text not null,
        status text not null check (status in ('RUNNING','COMPLETED','FAILED','CANCELLED')),
        branch text,
        output jsonb,
        error text,
        started_at timestamptz not null default now(),
        finished_at timestamptz,
        primary key (execution_id, seq)
      );`);
    // Workflow emails are keyed by (execution, step): a replayed step finds its email instead of making another.
    this.addSql(`alter table emails add column source_key text;`);
    this.addSql(`create unique index emails_source_key on emails (project_id, source_key) where source_key is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists emails_source_key; alter table emails drop column if exists source_key;');
    this.addSql('drop table if exists execution_steps, workflow_entries, workflow_executions, workflow_transitions, workflow_steps, workflows;');
    this.addSql('alter table projects drop column if exists webhook_secret;');
  }
}
