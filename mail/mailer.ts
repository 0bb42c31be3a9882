import type { Config } from '../config';
import { outboxDir } from './outbox';
import type { ReturnPath } from './compose';
import { createOutboxMailer, createSmtpMailer, type Mailer } from './transport';

/** The relay at SMTP_URL (emails going from their bounce addresses, given `returnPath`), or (unconfigured) an outbox folder under DATA_DIR. */
export function mailerFromConfig(
  config: Pick<Config, 'smtpUrl' | 'dataDir'>,
  log: (msg: string) => void = () => {},
  returnPath?: ReturnPath,
): Mailer {
  if (config.smtpUrl) return createSmtpMailer(config.smtpUrl, returnPath);
  const outbox = outboxDir(config.dataDir);
  log(`SMTP_URL is not set: outbox mode. Emails are written to ${outbox} instead of being sent (read them at /outbox); a registered domain counts as verified for sending`);
  return createOutboxMailer(outbox);
}
