import { Migration } from '@mikro-orm/migrations';

/**
 * When a campaign was (last) scheduled, for `campaign.scheduled` in the activity feed. Campaigns
 * scheduled before this column existed keep null and are placed at their created_at.
 */
export class Migration20261126010000_campaign_scheduled_at extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table campaigns add column scheduled_at timestamptz;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table campaigns drop column if exists scheduled_at;');
  }
}
