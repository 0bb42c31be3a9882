import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Config } from '../../config';
import type { Orm } from '../../db/orm';
import { closeSystemEmail, loadSystemEmail } from '../../db/accounts/system-emails';
import { systemMessage } from '../../mail/account-emails';
import { dkimKeyObject } from '../../mail/dkim';
import { SmtpError } from '../../mail/smtp-errors';
import type { Mailer } from '../../mail/transport';
import { smtpPermanentFailure } from '../failures';

export function createSystemEmailActivities({ orm, mailer, config }: { orm: Orm; mailer: Mailer; config: Pick<Config, 'auth'> }) {
  const key = config.auth.systemDkim;
  const dkim = key && { domainName: key.domain, keySelector: key.selector, privateKey: dkimKeyObject(key.privateKeyPem) };
  return {
    /**
     * Hands one account email to the relay, from SYSTEM_EMAIL_FROM (DKIM-signed when configured),
     * then records it at once, as deliverEmail does: a retried attempt finds it sent. When recording
     * fails here, the workflow retries it with recordSystemEmailSent without mailing the user twice.
     */
    async deliverSystemEmail(id: string): Promise<{ delivered: boolean; recorded?: boolean }> {
      const em = orm.em.fork();
      const email = await loadSystemEmail(em, id);
      if (!email) {
        // Started before the API's commit: the first attempts may not see the row yet.
        if (Context.current().info.attempt < 10) throw ApplicationFailure.retryable(`System email ${id} not visible yet`);
        return { delivered: false };
      }
      if (email.sentAt) return { delivered: false };
      try {
        const beat = setInterval(() => Context.current().heartbeat(), 5_000);
        await mailer.send(systemMessage(email, config.auth.systemFrom, dkim)).finally(() => clearInterval(beat));
      } catch (err) {
        if (err instanceof SmtpError && err.permanent) {
          // Never deliverable: the link it carries goes too.
          await closeSystemEmail(em, id, false);
          throw smtpPermanentFailure(err);
        }
        throw err;
      }
      const recorded = await closeSystemEmail(em, id, true).then(
        () => true,
        (err: unknown) => {
          Context.current().log.warn('Recording a sent account email failed; the workflow retries it', { id, error: String(err) });
          return false;
        },
      );
      return { delivered: true, recorded };
    },

    async recordSystemEmailSent(id: string): Promise<void> {
      await closeSystemEmail(orm.em.fork(), id, true);
    },
  };
}

export type SystemEmailActivities = ReturnType<typeof createSystemEmailActivities>;
