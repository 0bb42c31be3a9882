import { Migration } from '@mikro-orm/migrations';

/**
 * The transactional outbox (docs/design.md, "One delivery engine"): what a request must cause
 * later is written as rows in its own transaction, and long-running workflows on the worker
 * drain them.
 *
 * - `emails.queue`: the Temporal task queue whose delivery engine sends the email; null for
 *   campaign mail, which the campaign's own batches send. Emails waiting when this runs are
 *   marked `*`: the first engine to start adopts them, so nothing queued before the upgrade is
 *   lost (their old workflows may still run too; the lease keeps the two apart).
 * - `emails.lease_until` / `lease_owner`: who is sending it until when. The engine leases what
 *   it claims (`engine`); an email handed to its own retry workflow is leased to it (`workflow`)
 *   for as long as that workflow may wait between attempts. An expired lease is anyone's.
 * - `trigger_outbox`: one row per tracked event that has journeys to start or executions to
 *   signal, drained by the trigger dispatcher.
 */
export class Migration20261126120000_delivery_outbox extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table emails
        add column queue text,
        add column lease_until timestamptz,
        add column lease_owner text;`);
    this.addSql(`update emails set queue = '*' where status in ('QUEUED','SENDING') and campaign_id is null;`);
    // Two narrow indexes rather than one over both statuses: a claimed or sent row leaves the
    // QUEUED one at once, so a claim never walks past the rows it or another engine took.
    this.addSql(`create index emails_queued on emails (queue, created_at) where status = 'QUEUED' and queue is not null;`);
    this.addSql(`create index emails_leased on emails (queue, lease_until) where status = 'SENDING' and queue is not null;`);
    this.addSql(`
      create table trigger_outbox (
        id bigserial primary key,
        queue text not null,
        project_id text not null,
        contact_id text not null,
        event_id text not null,
        name text not null,
        tracked_at timestamptz not null,
        context jsonb not null,
        signal_executions text[] not null,
        lease_until timestamptz,
        created_at timestamptz not null default now()
      );`);
    this.addSql('create index trigger_outbox_queue on trigger_outbox (queue, id);');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists trigger_outbox;');
    this.addSql('drop index if exists emails_queued; drop index if exists emails_leased;');
    this.addSql('alter table emails drop column if exists queue, drop column if exists lease_until, drop column if exists lease_owner;');
  }
}
