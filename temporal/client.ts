import { Client, Connection, type WorkflowService } from '@temporalio/client';
import { type Config, loadConfig } from '../config';

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
}

/** The settings that workflow starts pass on to their workflows (domain check periods, retry caps). */
export type GatewayConfig = Pick<Config, 'domainCheck' | 'sendRetryMaxIntervalSeconds' | 'campaignBatchSize'>;

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

/**
 * The service's handle on Temporal: the client, the task queue its workflows run on and the
 * settings they are started with. Starting, signalling and cancelling a workflow belongs to its
 * feature (temporal/<feature>/lifecycle.ts, each helper taking this handle first); the API calls
 * those, never the raw client.
 */
export class TemporalGateway {
  constructor(
    readonly client: Client,
    readonly taskQueue: string,
    readonly config: GatewayConfig = loadConfig({}),
    /**
     * The client shares its NativeConnection with a worker polling `taskQueue` (an activity's
     * Context client): starts of workflows on that queue ask for eager start, so the server hands the
     * first workflow task back in the start's reply to this worker instead of queueing it for a poll.
     */
    readonly startsEagerly = false,
  ) {}

  static async connect(settings: TemporalSettings, config?: GatewayConfig): Promise<TemporalGateway> {
    const connection = await Connection.connect({ address: settings.address });
    return new TemporalGateway(new Client({ connection, namespace: settings.namespace }), settings.taskQueue, config);
  }

  /** The workers polling this handle's task queue lately (see the function of the same name). */
  taskQueuePollers(): Promise<{ workflow: string[]; activity: string[] }> {
    return taskQueuePollers(this.client.workflowService, this.client.options.namespace, this.taskQueue);
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
