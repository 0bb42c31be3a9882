import { Migration } from '@mikro-orm/migrations';

/** Indexes for the activity feed and the analytics (db/insights/feed.ts, db/insights/analytics.ts); no new data. */
export class Migration20261125060000_analytics extends Migration {
  override async up(): Promise<void> {
    // The feed pages events newest first by (created_at, id); date ranges of stats and top events use it too.
    this.addSql('create index events_project_created on events (project_id, created_at, id);');
    // workflow.started / workflow.completed activity, and the WAITING executions of /activity/upcoming.
    this.addSql('create index workflow_executions_project_started on workflow_executions (project_id, started_at, id);');
    this.addSql(`create index workflow_executions_project_completed on workflow_executions (project_id, finished_at, id) where status = 'COMPLETED';`);
    this.addSql(`create index workflow_executions_project_waiting on workflow_executions (project_id, updated_at, id) where status = 'WAITING';`);
    // Time series of sends, opens and clicks: only the emails that have the moment.
    this.addSql('create index emails_project_sent on emails (project_id, sent_at) where sent_at is not null;');
    this.addSql('create index emails_project_opened on emails (project_id, opened_at) where opened_at is not null;');
    this.addSql('create index emails_project_clicked on emails (project_id, clicked_at) where clicked_at is not null;');
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists events_project_created, workflow_executions_project_started,
      workflow_executions_project_completed, workflow_executions_project_waiting,
      emails_project_sent, emails_project_opened, emails_project_clicked;`);
  }
}
