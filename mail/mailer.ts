import path from 'node:path';
import type { Config } from '../config';
import { createOutboxMailer, createSmtpMailer, type Mailer } from './transport';

/** The relay at SMTP_URL, or (unconfigured) an outbox folder under DATA_DIR. */
export function mailerFromConfig(config: Pick<Config, 'smtpUrl' | 'dataDir'>, log: (msg: string) => void = () => {}): Mailer {
  if (config.smtpUrl) return createSmtpMailer(config.smtpUrl);
  const outbox = path.resolve(config.dataDir, 'outbox');
  log(`SMTP_URL is not set: emails are written to ${outbox} instead of being sent`);
  return createOutboxMailer(outbox);
}
