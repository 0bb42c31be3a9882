import { proxyActivities } from '@temporalio/workflow';
import type { SystemEmailActivities } from './activities';
import { deliveryOptions } from '../delivery-options';

export interface SystemEmailInput {
  /** The system_emails row: the history holds its id only, never the link's token. */
  systemEmailId: string;
  maxRetryIntervalSeconds: number;
}

/** Delivers one account email (verification, password reset) with the same retry rules as every send. */
export async function sendSystemEmail(input: SystemEmailInput): Promise<void> {
  const { deliverSystemEmail } = proxyActivities<SystemEmailActivities>(deliveryOptions(input.maxRetryIntervalSeconds));
  const { recordSystemEmailSent } = proxyActivities<SystemEmailActivities>({
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
  });
  const outcome = await deliverSystemEmail(input.systemEmailId);
  if (outcome.delivered && !outcome.recorded) await recordSystemEmailSent(input.systemEmailId);
}
