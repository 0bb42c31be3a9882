import { Client, Connection, WorkflowIdConflictPolicy } from '@temporalio/client';
import { ProjectIdKey } from './search-attributes';
import { workflowIds } from './ids';
import type { deleteContactField } from './workflows';

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
}

/** Typed start/signal helpers: the API calls these, never the raw client. */
export class TemporalGateway {
  constructor(
    readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  static async connect(settings: TemporalSettings): Promise<TemporalGateway> {
    const connection = await Connection.connect({ address: settings.address });
    return new TemporalGateway(new Client({ connection, namespace: settings.namespace }), settings.taskQueue);
  }

  /** A second request for the same field joins the deletion already running. */
  async deleteContactField(projectId: string, key: string): Promise<{ removed: number }> {
    const handle = await this.client.workflow.start<typeof deleteContactField>('deleteContactField', {
      taskQueue: this.taskQueue,
      workflowId: workflowIds.deleteContactField(projectId, key),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      args: [{ projectId, key }],
      typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
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
