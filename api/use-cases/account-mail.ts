import type { TokenMail } from '../../db/accounts/user-tokens';
import { sendSystemEmail } from '../../temporal/system-email/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

/**
 * How sign-up, verification and password reset queue their email (db/accounts/user-tokens.ts): the
 * system_emails row, then its workflow, started inside the caller's transaction, so a refused start
 * rolls the account change back (call-temporal.ts); the delivery waits for the row to be visible.
 */
export function accountMail(deps: Pick<AppDeps, 'config' | 'temporal'>): TokenMail {
  return {
    publicUrl: deps.config.publicUrl,
    verifyTokenTtlMinutes: deps.config.auth.verifyTokenTtlMinutes,
    resetTokenTtlMinutes: deps.config.auth.resetTokenTtlMinutes,
    start: (id) => callTemporal(() => sendSystemEmail(deps.temporal, id)),
  };
}
