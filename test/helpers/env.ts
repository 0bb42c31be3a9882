import { randomUUID } from 'node:crypto';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import request from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../api/app';
import { buildAppDeps } from '../../api/deps';
import type { AppDeps } from '../../api/context';
import { loadConfig } from '../../config';
import type { Clock } from '../../db/clock';
import { createLogger } from '../../logger';
import { createOrm, type Orm } from '../../db/orm';
import { createProject, type ProjectWithKeys } from '../../db/projects/projects';
import { createDnsLookup } from '../../mail/dns';
import { loadBounceAddresses, startReturnPaths } from '../../db/domains/return-paths';
import { mailerFromConfig } from '../../mail/mailer';
import { TemporalGateway } from '../../temporal/client';
import { startWorker, type WorkerHandle } from '../../temporal/worker';

export interface TestEnv {
  deps: AppDeps;
  app: Express;
  orm: Orm;
  temporal: TemporalGateway;
  taskQueue: string;
  http: () => request.Agent;
  project(name?: string): Promise<ProjectWithKeys>;
  startWorker(): Promise<WorkerHandle>;
  close(): Promise<void>;
}

/**
 * One per test file: the real API over the run's database and Temporal server, with its own
 * task queue so workflows started here run on this file's worker only.
 */
export async function startTestEnv(env: Record<string, string> = {}, opts: { clock?: Clock } = {}): Promise<TestEnv> {
  quietSdkLogs();
  const taskQueue = `test-${randomUUID()}`;
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: process.env.TEST_DATABASE_URL,
    TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
    TEMPORAL_TASK_QUEUE: taskQueue,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    PUBLIC_URL: 'http://localhost:3000',
    ...env,
  });
  const orm = await createOrm(config.databaseUrl!, {}, taskQueue);
  const temporal = await TemporalGateway.connect(
    { address: config.temporal.address!, namespace: config.temporal.namespace, taskQueue },
    config,
  );
  const dns = createDnsLookup({ servers: config.dnsServers, timeoutMs: 1000, tries: 1 });
  // Emails go from their bounce addresses once their domain's return-path records check out, as in cli/start.ts.
  const returnPaths = await startReturnPaths(orm, await loadBounceAddresses(orm, config), config, () => {});
  const mailer = mailerFromConfig(config, undefined, returnPaths);
  const deps: AppDeps = await buildAppDeps({ config, orm, temporal, logger: createLogger(config), dns, clock: opts.clock });
  const { app } = createApp(deps);
  const workers: WorkerHandle[] = [];
  return {
    deps,
    app,
    orm,
    temporal,
    taskQueue,
    http: () => request.agent(app),
    project: (name = 'test project') => createProject(orm.em.fork(), name),
    async startWorker() {
      const handle = await startWorker(
        { address: config.temporal.address!, namespace: config.temporal.namespace, taskQueue },
        { orm, dns, mailer, config },
        { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! } },
      );
      workers.push(handle);
      return handle;
    },
    async close() {
      await Promise.all(workers.map((w) => w.shutdown()));
      mailer.close();
      returnPaths.stop();
      await temporal.close();
      await orm.close();
    },
  };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/** The SDK logs worker state changes at INFO; tests want its warnings only. Installable once per module registry. */
function quietSdkLogs(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // already installed by an earlier env in this test file
  }
}
