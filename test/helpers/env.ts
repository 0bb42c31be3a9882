import { randomUUID } from 'node:crypto';
import pino from 'pino';
import request from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../api/app';
import type { AppDeps } from '../../api/context';
import { loadConfig } from '../../config';
import { createOrm, type Orm } from '../../db/orm';
import { createProject, type ProjectWithKeys } from '../../db/projects';
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
export async function startTestEnv(env: Record<string, string> = {}): Promise<TestEnv> {
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
  const orm = await createOrm(config.databaseUrl!);
  const temporal = await TemporalGateway.connect({ address: config.temporal.address!, namespace: config.temporal.namespace, taskQueue });
  const deps: AppDeps = { config, orm, temporal, logger: pino({ level: config.logLevel }) };
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
        { orm },
        { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! } },
      );
      workers.push(handle);
      return handle;
    },
    async close() {
      await Promise.all(workers.map((w) => w.shutdown()));
      await temporal.close();
      await orm.close();
    },
  };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
