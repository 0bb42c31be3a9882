import { Writable } from 'node:stream';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createLogger } from '../../logger';
import { installSdkLogging } from '../../temporal/worker';
import { waitUntil } from '../helpers/wait';

/**
 * The Temporal SDK's own messages go through the service's pino logger (cli/start.ts installs the
 * same): JSON lines, warnings and up only. This file installs the process-wide Runtime itself, so
 * it starts no test env (which would install the console one first).
 */
const lines: string[] = [];
installSdkLogging(
  createLogger(
    { logLevel: 'trace' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    }),
  ),
);

test("a worker's warning reaches pino as a JSON line; its INFO chatter does not", async () => {
  const connection = await NativeConnection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS! });
  try {
    // Both a bundle and a source path: the SDK warns that it ignores the path.
    const worker = await Worker.create({
      connection,
      taskQueue: `sdk-logging-${Date.now()}`,
      workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! },
      workflowsPath: require.resolve('../../temporal/workflows'),
    });
    // Running and stopping it logs state changes at INFO.
    await worker.runUntil(waitUntil(() => worker.getState() === 'RUNNING', { timeoutMs: 10_000, intervalMs: 10, what: 'the worker running' }));
  } finally {
    await connection.close();
  }

  const logged = lines.map((l) => JSON.parse(l) as { level: number; msg: string; component?: string; sdkComponent?: string });
  expect(logged).toContainEqual(
    expect.objectContaining({
      level: 40,
      component: 'temporal',
      sdkComponent: 'worker',
      msg: expect.stringContaining('Ignoring WorkerOptions.workflowsPath'),
    }),
  );
  expect(logged.filter((l) => l.level < 40)).toEqual([]);
});
