import { WithStartWorkflowOperation, WorkflowIdConflictPolicy } from '@temporalio/client';
import { AppError } from '../../errors';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import { checkDomainNowUpdate } from '../signals';
import type { DomainCheckOutcome } from './activities';
import type { domainVerification } from './workflow';

/**
 * How long a caller waits for a worker to answer an Update. Long enough for the server's own
 * recovery: after a worker died without saying so, the workflow's next task waits on that worker's
 * sticky queue for the sticky schedule-to-start timeout (10 s) before any worker may take it, and
 * the domain check itself can spend ~9 s on DNS lookups that time out (3 s, then 6 s).
 */
const UPDATE_WAIT_SECONDS = 30;

function domainVerificationStart(temporal: TemporalGateway, projectId: string, domainId: string) {
  return {
    taskQueue: temporal.taskQueue,
    workflowId: workflowIds.domainVerification(domainId),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    args: [{ domainId, ...temporal.config.domainCheck }] as Parameters<typeof domainVerification>,
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
    staticSummary: `domain verification ${domainId}`,
  };
}

export async function startDomainVerification(temporal: TemporalGateway, projectId: string, domainId: string): Promise<void> {
  await temporal.client.workflow.start<typeof domainVerification>('domainVerification', domainVerificationStart(temporal, projectId, domainId));
}

/**
 * The forced check runs inside the domain's own workflow (an Update), so there is one code
 * path for checks; update-with-start revives the workflow if it is not running. With no worker
 * polling at all the answer is a 503 at once rather than after the whole wait.
 */
export async function checkDomainNow(temporal: TemporalGateway, projectId: string, domainId: string): Promise<DomainCheckOutcome> {
  if (!(await workerPolling(temporal))) throw workerUnavailable('No worker is polling the task queue');
  const startOp = new WithStartWorkflowOperation<typeof domainVerification>(
    'domainVerification',
    domainVerificationStart(temporal, projectId, domainId),
  );
  return withinSeconds(
    UPDATE_WAIT_SECONDS,
    temporal.client.workflow.executeUpdateWithStart(checkDomainNowUpdate, { startWorkflowOperation: startOp }),
  );
}

export async function stopDomainVerification(temporal: TemporalGateway, domainId: string): Promise<void> {
  try {
    await temporal.client.workflow.getHandle(workflowIds.domainVerification(domainId)).cancel();
  } catch (err) {
    // Already finished: nothing to stop.
    if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
  }
}

/** Whether some worker polls this task queue for both workflow and activity tasks; true when the server will not say. */
async function workerPolling(temporal: TemporalGateway): Promise<boolean> {
  try {
    const pollers = await temporal.taskQueuePollers();
    return pollers.workflow.length > 0 && pollers.activity.length > 0;
  } catch {
    return true; // e.g. a role without DescribeTaskQueue: the Update's own wait still bounds it
  }
}

const workerUnavailable = (message: string) =>
  new AppError(503, 'WORKER_UNAVAILABLE', message, {
    suggestion: 'Check that the Tidings worker is running and connected to Temporal, then retry.',
  });

/** A caller waiting on a worker gets a clear 503 instead of hanging when no worker answers. */
async function withinSeconds<T>(seconds: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(workerUnavailable(`No worker answered within ${seconds} seconds`)), seconds * 1000);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
