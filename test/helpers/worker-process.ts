import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { loadConfig } from '../../config';
import { createOrm } from '../../db/orm';
import { createDnsLookup } from '../../mail/dns';
import { mailerFromConfig } from '../../mail/mailer';
import { startWorker } from '../../temporal/worker';
import { waitUntil } from './wait';

/**
 * A Tidings worker in its own OS process, for tests that kill it (SIGKILL) and start another.
 *
 * As a script:
 *   WORKFLOW_BUNDLE=<pre-built bundle> DATABASE_URL=… TEMPORAL_ADDRESS=… TEMPORAL_TASK_QUEUE=… \
 *     node_modules/.bin/tsx test/helpers/worker-process.ts
 * reads the environment as `tidings start --worker` does (loadConfig: SMTP_URL, DNS_SERVERS,
 * JOURNEY_TIME_SCALE, …), wires the same dependencies as cli/start.ts (orm, DNS lookup, mailer,
 * config), runs the worker on the pre-built workflow bundle and prints "worker ready" on stdout
 * once it is polling. SIGTERM / SIGINT shut it down cleanly; SIGKILL is the crash under test.
 *
 * From a test:
 *   const child = await spawnWorkerProcess({ TEMPORAL_TASK_QUEUE: env.taskQueue, SMTP_URL: …, … });
 *   await child.kill();   // SIGKILL to the whole process group (tsx runs node as a child of its own)
 *   await child.stop();   // or: SIGTERM, a clean shutdown
 */

export const READY_LINE = 'worker ready';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const config = loadConfig(process.env);
  const codePath = process.env.WORKFLOW_BUNDLE;
  if (!config.databaseUrl) throw new Error('DATABASE_URL is required');
  if (!config.temporal.address) throw new Error('TEMPORAL_ADDRESS is required');
  if (!codePath) throw new Error('WORKFLOW_BUNDLE (path to the pre-built workflow bundle) is required');

  const orm = await createOrm(config.databaseUrl, {}, config.temporal.taskQueue);
  const dns = createDnsLookup({ servers: config.dnsServers });
  const mailer = mailerFromConfig(config);
  const settings = { address: config.temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue };
  const handle = await startWorker(settings, { orm, dns, mailer, config }, { workflowBundle: { codePath } });

  let stopping: Promise<void> | undefined;
  const stop = (code: number) =>
    (stopping ??= (async () => {
      await handle.shutdown().catch(() => undefined);
      mailer.close();
      await orm.close().catch(() => undefined);
      process.exit(code);
    })());
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
  // Spawned by a test: when the test process goes away (its end of stdin closes), so does this one.
  if (process.env.WORKER_EXIT_ON_STDIN_END === '1') {
    process.stdin.on('end', () => void stop(1));
    process.stdin.on('error', () => void stop(1));
    process.stdin.resume();
  }

  await waitUntil(() => handle.worker.getState() !== 'INITIALIZED', { timeoutMs: 60_000, intervalMs: 20, what: 'the worker leaving INITIALIZED' });
  if (handle.worker.getState() !== 'RUNNING') throw new Error(`worker state ${handle.worker.getState()}`);
  process.stdout.write(`${READY_LINE}\n`);
  await handle.done;
  await stop(0);
}

export interface WorkerProcess {
  /** The tsx process; also the id of the process group the worker runs in. */
  readonly pid: number;
  /** Everything the process wrote (stdout and stderr), for failure messages. */
  output(): string;
  /** Resolves when the tsx process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to the process group (tsx and the node process running the worker); resolves once it is gone. */
  kill(): Promise<void>;
  /** SIGTERM (a clean shutdown), then SIGKILL if it is still there after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

const SCRIPT = __filename;
const TSX = path.resolve(__dirname, '../../node_modules/.bin/tsx');

/**
 * The environment a child worker needs to serve a test env's task queue, on the run's database,
 * Temporal server and workflow bundle, with the given SMTP and DNS servers.
 */
export function childWorkerEnv(
  taskQueue: string,
  servers: { smtpUrl: string; dnsAddress: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    PUBLIC_URL: 'http://localhost:3000',
    DATABASE_URL: process.env.TEST_DATABASE_URL!,
    TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS!,
    TEMPORAL_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE: process.env.TEST_WORKFLOW_BUNDLE!,
    SMTP_URL: servers.smtpUrl,
    DNS_SERVERS: servers.dnsAddress,
    DOMAIN_CHECK_INTERVAL_SECONDS: '1',
    SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
    ...extra,
  };
}

/**
 * Starts the worker script in a new process group with the test's environment plus `env`, and
 * resolves once it printed "worker ready" (rejects, killing it, if it exits or takes too long).
 */
export async function spawnWorkerProcess(env: Record<string, string>, timeoutMs = 45_000): Promise<WorkerProcess> {
  const child: ChildProcess = spawn(TSX, [SCRIPT], {
    env: { ...process.env, WORKER_EXIT_ON_STDIN_END: '1', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
    // Its own process group, so a kill reaches the node process tsx starts as well.
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not spawn the worker process');
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let gone = false;
  void exited.then(() => (gone = true));

  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  };
  /** Waits until no process of the group is left (the worker node process may outlive tsx briefly). */
  const groupGone = (timeout: number) => {
    const noneLeft = () => {
      try {
        process.kill(-pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    return waitUntil(noneLeft, { timeoutMs: timeout, intervalMs: 50 }).catch(() => false);
  };

  const handle: WorkerProcess = {
    pid,
    output: () => out,
    exited,
    async kill() {
      signalGroup('SIGKILL');
      await exited;
      await groupGone(5_000);
    },
    async stop(graceMs = 10_000) {
      if (gone && (await groupGone(0))) return;
      signalGroup('SIGTERM');
      if (!(await groupGone(graceMs))) signalGroup('SIGKILL');
      await exited;
      await groupGone(5_000);
    },
  };

  await new Promise<void>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => fail(new Error(`worker process not ready within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void handle.kill().finally(() => reject(err));
    };
    const onData = (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (!settled && out.includes(`${READY_LINE}\n`)) {
        settled = true;
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => void (out += chunk.toString('utf8')));
    void exited.then(({ code, signal }) => fail(new Error(`worker process exited (${code ?? signal}) before it was ready:\n${out}`)));
  });
  return handle;
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`worker process: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
