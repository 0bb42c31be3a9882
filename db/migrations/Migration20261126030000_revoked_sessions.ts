import { Migration } from '@mikro-orm/migrations';

/**
 * Sessions ended by a sign-out (db/accounts/revoked-sessions.ts), by the session's `jti`, until the moment
 * the session would have expired anyway.
 */
export class Migration20261126030000_revoked_sessions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table revoked_sessions (
        jti text primary key,
        expires_at timestamptz not null
      );`);
    this.addSql('create index revoked_sessions_expires on revoked_sessions (expires_at);');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists revoked_sessions;');
  }
}
