import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { type ActivityDeps, createActivities } from './activities';
import type { TemporalSettings } from './client';

export interface WorkerHandle {
  worker: Worker;
  /** Resolves when the worker has stopped (after shutdown() or a fatal error). */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Starts a worker on the task queue. Tests pass a pre-built `workflowBundle` (bundled once
 * per run); the service bundles from source at start.
 */
export async function startWorker(
  settings: TemporalSettings,
  deps: ActivityDeps,
  options: Partial<Pick<WorkerOptions, 'workflowBundle' | 'taskQueue'>> = {},
): Promise<WorkerHandle> {
  const connection = await NativeConnection.connect({ address: settings.address });
  const worker = await Worker.create({
    connection,
    namespace: settings.namespace,
    taskQueue: options.taskQueue ?? settings.taskQueue,
    activities: createActivities(deps),
    ...(options.workflowBundle
      ? { workflowBundle: options.workflowBundle }
      : { workflowsPath: require.resolve('./workflows') }),
  });
  const done = worker.run().finally(() => connection.close());
  return {
    worker,
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
