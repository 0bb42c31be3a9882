import { Migration } from '@mikro-orm/migrations';

/**
 * When a domain's return-path host (`<label>.<domain>`: its MX and SPF) last checked out: from then
 * on its emails go from their bounce addresses (db/domains/return-paths.ts). Null until then, and
 * again once a conclusive check finds the records gone.
 */
export class Migration20261204000000_return_path extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table domains add column return_path_verified_at timestamptz;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table domains drop column if exists return_path_verified_at;');
  }
}
