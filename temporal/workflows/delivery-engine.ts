import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { continueAsNew, ParentClosePolicy, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RetryHandoff } from '../activities/delivery-engine';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import { sendEmails } from './send-emails';

export interface DeliveryEngineInput {
  /** The task queue whose emails this engine sends (emails.queue). */
  queue: string;
  /** Which of the queue's engines this is (workflowIds.deliveryEngine). */
  index: number;
  /** Each round (one activity) takes new emails for this long. */
  roundSeconds: number;
  /** Longest wait between attempts of a handed-off email. */
  maxRetryIntervalSeconds: number;
}

/** Rounds per run before continue-as-new: a few thousand history events at most. */
const ROUNDS_PER_RUN = 200;

/**
 * One delivery engine of a task queue, running for as long as the service does (started by every
 * worker, temporal/engines.ts). It supervises; the sending happens in its rounds, each one
 * long-running activity that drains the queue's due emails (temporal/activities/delivery-engine.ts).
 * An email that got a transient failure leaves the fast path for its own retry workflow
 * (sendEmails, id `send:<email id>`, ProjectId set), which backs off up to the retry ceiling and
 * shows the operator where that email stands; nobody else's mail waits for it.
 */
export async function deliveryEngine(input: DeliveryEngineInput): Promise<void> {
  const { deliverQueuedEmails } = proxyActivities<Activities>({
    startToCloseTimeout: `${input.roundSeconds + 120} seconds`,
    // A dead worker's round is retried elsewhere within seconds.
    heartbeatTimeout: '10 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
  });
  for (let round = 0; round < ROUNDS_PER_RUN && !workflowInfo().continueAsNewSuggested; round++) {
    const result = await deliverQueuedEmails({ queue: input.queue, maxSeconds: input.roundSeconds });
    await Promise.all(result.retries.map((email) => startRetry(email, input.maxRetryIntervalSeconds)));
  }
  await continueAsNew<typeof deliveryEngine>(input);
}

async function startRetry(email: RetryHandoff, maxRetryIntervalSeconds: number): Promise<void> {
  try {
    await startChild(sendEmails, {
      workflowId: workflowIds.sendEmails(email.emailId),
      args: [{ emailIds: [email.emailId], maxRetryIntervalSeconds }],
      // The retry outlives this run of the engine (continue-as-new) and the engine itself.
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: [{ key: ProjectIdKey, value: email.projectId }],
      staticSummary: `retry email ${email.emailId}`,
    });
  } catch (err) {
    // Handed off again while its retry workflow still runs: that one carries on.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}
