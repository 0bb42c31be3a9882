import { allHandlersFinished, condition, continueAsNew, isCancellation, proxyActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { DomainActivities } from './activities';
import { checkDomainNowUpdate } from '../signals';

const { checkDomain } = proxyActivities<DomainActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumInterval: '1 minute' },
});

export interface DomainVerificationInput {
  domainId: string;
  /** Re-check period while pending (5 minutes in production; seconds in tests). */
  pendingIntervalSeconds: number;
  /** Re-check period once verified, to notice records that disappear. */
  verifiedIntervalSeconds: number;
}

/**
 * One per domain, for as long as the domain exists: checks DNS, sleeps, checks again. A forced
 * check (GET /domains/:id/verify) is an Update that runs the same activity at once.
 * Deleting the domain cancels the workflow; a check that finds it gone ends it too.
 */
export async function domainVerification(input: DomainVerificationInput): Promise<void> {
  let deleted = false;
  setHandler(checkDomainNowUpdate, async () => {
    const outcome = await checkDomain(input.domainId);
    deleted ||= outcome.domain === undefined;
    return outcome;
  });
  try {
    for (;;) {
      const { domain } = await checkDomain(input.domainId);
      if (!domain || deleted) break;
      const interval = domain.status === 'verified' ? input.verifiedIntervalSeconds : input.pendingIntervalSeconds;
      await sleep(interval * 1000);
      if (deleted) break;
      if (workflowInfo().continueAsNewSuggested) {
        // A forced check in flight must answer its caller before this run hands over.
        await condition(allHandlersFinished);
        await continueAsNew<typeof domainVerification>(input);
      }
    }
    await condition(allHandlersFinished);
  } catch (err) {
    if (isCancellation(err)) return;
    throw err;
  }
}
