import { Client, Connection, WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, type WorkflowService, WithStartWorkflowOperation } from '@temporalio/client';
import { type Config, loadConfig } from '../config';
import { AppError } from '../errors';
import type { DomainCheckOutcome } from './domains/activities';
import { workflowIds } from './ids';
import { checkDomainNowUpdate, trackedEventSignal, type TrackedEventMessage } from './signals';
import { CampaignIdKey, ContactIdKey, ProjectIdKey, TidingsWorkflowIdKey } from './search-attributes';
import { campaignScheduleSignal, type CampaignTuning, DEFAULT_CAMPAIGN_TUNING } from './campaigns/workflow';
import type { bulkContacts, campaign, deleteContactField, domainVerification, journey, JourneyInput, sendSystemEmail } from './workflows';

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
}

type GatewayConfig = Pick<Config, 'domainCheck' | 'sendRetryMaxIntervalSeconds'>;

/**
 * How long a caller waits for a worker to answer an Update. Long enough for the server's own
 * recovery: after a worker died without saying so, the workflow's next task waits on that worker's
 * sticky queue for the sticky schedule-to-start timeout (10 s) before any worker may take it, and
 * the domain check itself can spend ~9 s on DNS lookups that time out (3 s, then 6 s).
 */
const UPDATE_WAIT_SECONDS = 30;

/** Values of temporal.api.enums.v1.TaskQueueType and TaskQueueKind. */
const TASK_QUEUE_TYPE = { workflow: 1, activity: 2 } as const;
const TASK_QUEUE_KIND_NORMAL = 1;

/**
 * Identities of the workers the server saw poll the task queue for workflow and for activity
 * tasks lately (it keeps a poller for a few minutes after its last poll).
 */
export async function taskQueuePollers(
  service: WorkflowService,
  namespace: string,
  taskQueue: string,
): Promise<{ workflow: string[]; activity: string[] }> {
  const identities = async (taskQueueType: number) => {
    const res = await service.describeTaskQueue({ namespace, taskQueue: { name: taskQueue, kind: TASK_QUEUE_KIND_NORMAL }, taskQueueType });
    return (res.pollers ?? []).map((p) => p.identity ?? '');
  };
  const [workflow, activity] = await Promise.all([identities(TASK_QUEUE_TYPE.workflow), identities(TASK_QUEUE_TYPE.activity)]);
  return { workflow, activity };
}

/** Typed start/signal helpers: the API calls these, never the raw client. */
export class TemporalGateway {
  constructor(
    readonly client: Client,
    private readonly taskQueue: string,
    private readonly config: GatewayConfig = loadConfig({}),
  ) {}

  static async connect(settings: TemporalSettings, config?: GatewayConfig): Promise<TemporalGateway> {
    const connection = await Connection.connect({ address: settings.address });
    return new TemporalGateway(new Client({ connection, namespace: settings.namespace }), settings.taskQueue, config);
  }

  /** A second request for the same field joins the deletion already running. */
  async deleteContactField(projectId: string, key: string): Promise<{ removed: number }> {
    const handle = await this.client.workflow.start<typeof deleteContactField>('deleteContactField', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.deleteContactField(projectId, key),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ projectId, key }],
      typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
      staticSummary: `delete contact field "${key}"`,
    });
    return handle.result();
  }

  /** Starts the import job's workflow; a repeat for the same job joins the one under way. */
  async startContactImport(projectId: string, jobId: string): Promise<void> {
    await this.client.workflow.start<typeof import('./workflows').contactImport>('contactImport', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.contactImport(jobId),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ jobId }],
      typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
      staticSummary: `contact import job ${jobId}`,
    });
  }

  private domainVerificationStart(projectId: string, domainId: string) {
    return {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.domainVerification(domainId),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ domainId, ...this.config.domainCheck }] as Parameters<typeof domainVerification>,
      typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
      staticSummary: `domain verification ${domainId}`,
    };
  }

  async startDomainVerification(projectId: string, domainId: string): Promise<void> {
    await this.client.workflow.start<typeof domainVerification>('domainVerification', this.domainVerificationStart(projectId, domainId));
  }

  /**
   * The forced check runs inside the domain's own workflow (an Update), so there is one code
   * path for checks; update-with-start revives the workflow if it is not running. With no worker
   * polling at all the answer is a 503 at once rather than after the whole wait.
   */
  async checkDomainNow(projectId: string, domainId: string): Promise<DomainCheckOutcome> {
    if (!(await this.workerPolling())) throw workerUnavailable('No worker is polling the task queue');
    const startOp = new WithStartWorkflowOperation<typeof domainVerification>(
      'domainVerification',
      this.domainVerificationStart(projectId, domainId),
    );
    return withinSeconds(
      UPDATE_WAIT_SECONDS,
      this.client.workflow.executeUpdateWithStart(checkDomainNowUpdate, { startWorkflowOperation: startOp }),
    );
  }

  /** Whether some worker polls this task queue for both workflow and activity tasks; true when the server will not say. */
  private async workerPolling(): Promise<boolean> {
    try {
      const pollers = await taskQueuePollers(this.client.workflowService, this.client.options.namespace, this.taskQueue);
      return pollers.workflow.length > 0 && pollers.activity.length > 0;
    } catch {
      return true; // e.g. a role without DescribeTaskQueue: the Update's own wait still bounds it
    }
  }

  async stopDomainVerification(domainId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(workflowIds.domainVerification(domainId)).cancel();
    } catch (err) {
      // Already finished: nothing to stop.
      if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
    }
  }

  /**
   * Starts one execution; its id is the execution row's, so a repeat (a dispatcher retrying after
   * a crash) finds it started, even long finished, and starts nothing. `names` label it in the
   * Temporal UI (workflow name, contact email); ids stand in without them.
   */
  async startJourney(input: JourneyInput, names?: { workflow: string; contact: string }): Promise<void> {
    await this.client.workflow.start<typeof journey>('journey', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.journey(input.executionId),
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      args: [input],
      staticSummary: `journey ${names?.workflow ?? input.workflowId} · contact ${names?.contact ?? input.contactId}`,
      typedSearchAttributes: [
        { key: ProjectIdKey, value: input.projectId },
        { key: TidingsWorkflowIdKey, value: input.workflowId },
        { key: ContactIdKey, value: input.contactId },
      ],
    }).catch((err: unknown) => {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    });
  }

  /** Delivers a tracked event to an execution; one that has already ended is skipped. */
  async signalTrackedEvent(executionId: string, event: TrackedEventMessage): Promise<void> {
    try {
      await this.client.workflow.getHandle(workflowIds.journey(executionId)).signal(trackedEventSignal, event);
    } catch (err) {
      if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
    }
  }

  /** Starts the workflow of a bulk contact job; its id is the job's, so a repeat joins it. */
  async startBulkContacts(projectId: string, jobId: string): Promise<void> {
    await this.client.workflow.start<typeof bulkContacts>('bulkContacts', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.bulkContacts(jobId),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ jobId }],
      typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
      staticSummary: `bulk contact job ${jobId}`,
    });
  }

  /** Delivers one stored account email; its id is the row's, so a repeat cannot mail twice. */
  async sendSystemEmail(systemEmailId: string): Promise<void> {
    await this.client.workflow.start<typeof sendSystemEmail>('sendSystemEmail', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.systemEmail(systemEmailId),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ systemEmailId, maxRetryIntervalSeconds: this.config.sendRetryMaxIntervalSeconds }],
      staticSummary: `account email ${systemEmailId}`,
    });
  }

  /** Requests cancellation; the execution records CANCELLED itself before it stops. */
  async cancelJourney(executionId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(workflowIds.journey(executionId)).cancel();
    } catch (err) {
      if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
    }
  }

  /**
   * Starts the campaign's workflow, or (already running: a SCHEDULED campaign whose time moved)
   * tells it the new time. Called inside the transaction that changes the campaign's row.
   */
  async startCampaign(
    input: { projectId: string; campaignId: string; scheduledFor: string | null },
    tuning: Partial<CampaignTuning> = {},
  ): Promise<void> {
    await this.client.workflow.signalWithStart<typeof campaign, [{ scheduledFor: string | null }]>('campaign', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.campaign(input.campaignId),
      args: [
        {
          ...input,
          tuning: { ...DEFAULT_CAMPAIGN_TUNING, ...tuning },
          maxRetryIntervalSeconds: this.config.sendRetryMaxIntervalSeconds,
        },
      ],
      signal: campaignScheduleSignal,
      signalArgs: [{ scheduledFor: input.scheduledFor }],
      staticSummary: `campaign ${input.campaignId}`,
      typedSearchAttributes: [
        { key: ProjectIdKey, value: input.projectId },
        { key: CampaignIdKey, value: input.campaignId },
      ],
    });
  }

  /** Requests cancellation; the workflow stops its batch and records CANCELLED itself. */
  async cancelCampaign(campaignId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(workflowIds.campaign(campaignId)).cancel();
    } catch (err) {
      if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
    }
  }

  /**
   * Recomputes a tracked dynamic segment and returns the diff; entry/exit events are delivered by a
   * child workflow afterwards. A second request while one runs joins it.
   */
  async computeSegment(projectId: string, segmentId: string): Promise<{ added: number; removed: number; total: number }> {
    const handle = await this.client.workflow.start<typeof import('./workflows').segmentCompute>('segmentCompute', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.segmentCompute(segmentId),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ projectId, segmentId }],
      typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
      staticSummary: `segment ${segmentId} recompute`,
    });
    return handle.result();
  }

  async healthy(): Promise<boolean> {
    try {
      await this.client.connection.workflowService.getSystemInfo({});
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.client.connection.close();
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
