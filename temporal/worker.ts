import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Client } from '@temporalio/client';
import { NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { TemporalSdkLogger } from '../logger';
import { EngineWakeups, OutboxListener } from './wakeups';
import { type ActivityDeps, createActivities } from './activities';
import { ensureEngines } from './engines';
import { type TemporalSettings, taskQueuePollers } from './client';

/**
 * Sends the Temporal SDK's messages, and the Rust core's (forwarded), to the service's logger as
 * JSON lines, warnings and errors only. Once per process, before any worker or native connection.
 */
export function installSdkLogging(logger: Logger): void {
  Runtime.install({
    logger: new TemporalSdkLogger(logger, 'WARN'),
    telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
  });
}

export interface WorkerHandle {
  worker: Worker;
  /** Resolves when the worker has stopped (after shutdown() or a fatal error). */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * What the service's workers set beyond the SDK's defaults (the benches' bare-workflow reference
 * uses the same). Half of the workflow-task pollers poll the task queue's normal queue instead of
 * a fifth: a new execution's first workflow task comes from it, unless the start was eager (only
 * while the worker has a free slot), and most executions here are journeys that end in that one
 * task. With 2 pollers of 10 on it, journeys started faster than they were picked up, and their
 * first tasks waited 1.2–2.5 s in the queue (bench/workflows.ts: 66–71 → 99–105 executions/s).
 * Executions that wait (a DELAY, WAIT_FOR_EVENT) still get the sticky queue's pollers.
 */
export const WORKER_TUNING = { nonStickyToStickyPollRatio: 1 } satisfies Partial<WorkerOptions>;

/** How long startWorker waits for the server to report the worker's polls (well under a second, normally). */
const POLL_CONFIRM_TIMEOUT_MS = 30_000;

/**
 * Starts a worker on the task queue and resolves once the server has seen it poll (see
 * untilPolling): from then on a workflow or activity task reaches it, so whatever starts next (the
 * API, a test) can count on a worker. Then it makes sure the queue's delivery engines and trigger
 * dispatcher run (temporal/engines.ts). Tests pass a pre-built `workflowBundle` (bundled once per
 * run); the service bundles from source at start.
 */
export async function startWorker(
  settings: TemporalSettings,
  deps: Omit<ActivityDeps, 'listener' | 'wakeups'>,
  options: Partial<Omit<WorkerOptions, 'connection' | 'namespace' | 'activities' | 'identity'>> = {},
): Promise<WorkerHandle> {
  const connection = await NativeConnection.connect({ address: settings.address });
  const taskQueue = options.taskQueue ?? settings.taskQueue;
  const listener = new OutboxListener(deps.orm.config.get('clientUrl')!);
  const wakeups = new EngineWakeups(deps.orm, (err) => Runtime.instance().logger.warn(`could not wake the outbox engines (they look within a second anyway): ${String(err)}`));
  const worker = await Worker.create({
    connection,
    namespace: settings.namespace,
    // The SDK's default (pid@host) repeats across container restarts: the poller a previous
    // process left in the server's list must not pass for this one's.
    identity: `${process.pid}@${os.hostname()}/${randomUUID().slice(0, 8)}`,
    activities: createActivities({ ...deps, listener, wakeups }),
    ...WORKER_TUNING,
    ...(options.workflowBundle ? {} : { workflowsPath: require.resolve('./workflows') }),
    // Tests pass the pre-built bundle; benches also tune the worker.
    ...options,
    taskQueue,
  });
  const done = worker.run().finally(async () => {
    await listener.close();
    await connection.close();
  });
  const handle: WorkerHandle = {
    worker,
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
  if (!(await untilPolling(handle, POLL_CONFIRM_TIMEOUT_MS))) {
    const waited = POLL_CONFIRM_TIMEOUT_MS / 1000;
    Runtime.instance().logger.warn(`The server has not reported this worker polling "${worker.options.taskQueue}" after ${waited} s`);
  }
  await ensureEngines(new Client({ connection, namespace: settings.namespace }), taskQueue, deps.config);
  return handle;
}

/**
 * Resolves true once the server has seen this worker poll its task queue for workflow and for
 * activity tasks — its workflow code is loaded by then (Worker.create) — or false after
 * `timeoutMs`; rejects if the worker stops first. `run()` only starts the polls: the worker state
 * says RUNNING before any of them has reached the server.
 */
async function untilPolling(handle: WorkerHandle, timeoutMs: number): Promise<boolean> {
  const { worker } = handle;
  const { identity, namespace, taskQueue } = worker.options;
  const stopped = handle.done.then(() => {
    throw new Error('The worker stopped before it was polling');
  });
  stopped.catch(() => undefined); // still rejects the races below; alone it is no failure
  const deadline = Date.now() + timeoutMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    // A server that refuses DescribeTaskQueue (permissions) cannot confirm it: the deadline ends the wait.
    const described = taskQueuePollers(worker.connection!.workflowService, namespace, taskQueue).catch(() => undefined);
    const pollers = await Promise.race([described, stopped]);
    if (pollers?.workflow.includes(identity) && pollers.activity.includes(identity)) return true;
    if (Date.now() + delay > deadline) return false;
    await Promise.race([new Promise((resolve) => setTimeout(resolve, delay)), stopped]);
  }
}
