import { type ChildProcess, fork } from 'node:child_process';
import type { Config } from '../config';
import { createOrm, migrate } from '../db/orm';
import { StartupError } from './errors';
import { type Log, resolveDatabase, resolveTemporal } from './services';
import type { Role } from './start';
import { Lifecycle } from './lifecycle';

/**
 * `tidings start`: PostgreSQL and Temporal as configured (or embedded), the migrations, then the
 * worker and the API as two child processes, `tidings start --worker` and `tidings start --api`,
 * the same processes a production deployment runs apart. One Node process is one event loop on one
 * core, and the API's requests and the worker's sends slowed each other down in one
 * (docs/performance.md). Stops on SIGINT/SIGTERM, or when either child exits.
 */
export async function superviseService(config: Config, log: Log): Promise<void> {
  const life = new Lifecycle(log);
  const children: RoleProcess[] = [];
  const started = await life.startUp(async () => {
    const db = await resolveDatabase(config, log);
    life.onStop(db.stop);
    life.checkpoint();
    const orm = await createOrm(db.url, {}, config.temporal.taskQueue);
    try {
      const applied = await migrate(orm);
      if (applied.length) log(`Applied migrations: ${applied.join(', ')}`);
    } finally {
      await orm.close();
    }
    life.checkpoint();
    const temporal = await resolveTemporal(config, log);
    life.onStop(temporal.stop);
    life.checkpoint();

    // The children find what this process resolved, as a production deployment configures them.
    const env = { ...process.env, DATABASE_URL: db.url, TEMPORAL_ADDRESS: temporal.address };
    // The worker first: the API comes up once a worker polls, so the first request that needs one finds it.
    for (const role of ['worker', 'api'] as const) {
      const child = startRole(role, env);
      children.push(child);
      life.onStop(child.stop);
      await Promise.race([child.ready, life.stopRequested]);
      life.checkpoint();
    }
    if (temporal.uiUrl) log(`Temporal Web UI: ${temporal.uiUrl}`);
  });
  if (!started) return;
  const ended = await Promise.race([life.stopRequested.then(() => undefined), ...children.map((c) => c.exited.then(() => c))]);
  if (ended) life.requestStop(`the ${ended.role} process`, `The ${ended.role} process exited (${ended.exitDescription()}), stopping the service`);
  await life.stopAll();
  if (ended) throw new StartupError(`The ${ended.role} process exited (${ended.exitDescription()}); the service stopped.`);
}

interface RoleProcess {
  role: Role;
  /** Resolves once the role is up; rejects if it exits first. */
  ready: Promise<void>;
  exited: Promise<void>;
  exitDescription(): string;
  /** SIGTERM, then waits for it to drain and exit. */
  stop(): Promise<void>;
}

/** `tidings start --<role>` as a child of this process, with an IPC channel (cli/start.ts). */
function startRole(role: Role, env: NodeJS.ProcessEnv): RoleProcess {
  // This very CLI again, through the same loader flags (tsx from source, none from the build). In a
  // session of its own, as a service manager starts each: Linux shares the CPU between sessions
  // first, so the two together would weigh as one session beside PostgreSQL's, and the worker's
  // lower priority is its session's (cli/priority.ts). Signals reach it through this process.
  const child: ChildProcess = fork(process.argv[1]!, ['start', `--${role}`], { env, stdio: 'inherit', detached: true });
  let code: number | null = null;
  let signal: NodeJS.Signals | null = null;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (c, s) => {
      code = c;
      signal = s;
      resolve();
    }),
  );
  const exitDescription = () => (signal ? `signal ${signal}` : `code ${code}`);
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (m: { ready?: boolean }) => m?.ready && resolve());
    void exited.then(() => reject(new StartupError(`The ${role} process exited during start-up (${exitDescription()}).`)));
  });
  ready.catch(() => undefined);
  return {
    role,
    ready,
    exited,
    exitDescription,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
