import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { bundleWorkflowCode } from '@temporalio/worker';
import { findTemporalCli, startTemporalDevServer } from '../cli/temporal-server';
import { createOrm, migrate } from '../db/orm';

const log = (msg: string) => process.stderr.write(`[test setup] ${msg}\n`);

/**
 * Real services for the whole run: a fresh PostgreSQL database, a Temporal dev server on a
 * free port (started here with a long readiness wait), and the workflow bundle built once.
 */
export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const adminUrl = process.env.TEST_POSTGRES_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `tidings_test_${Date.now()}_${process.pid}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  const databaseUrl = url.toString();
  const orm = await createOrm(databaseUrl);
  await migrate(orm);
  await orm.close();
  log(`database ${dbName} migrated`);

  const workDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-test-'));
  const [temporal, bundle] = await Promise.all([
    (async () => {
      if (process.env.TEST_TEMPORAL_ADDRESS) return { address: process.env.TEST_TEMPORAL_ADDRESS, stop: async () => {} };
      const cliPath = await findTemporalCli({ cliPath: process.env.TEMPORAL_CLI_PATH, allowBuild: true, log });
      return startTemporalDevServer({
        cliPath,
        port: 0,
        uiPort: false,
        readinessTimeoutMs: 120_000,
        log,
        logFile: path.join(workDir, 'temporal.log'),
      });
    })(),
    bundleWorkflowCode({ workflowsPath: require.resolve('../temporal/workflows'), logger: quietBundlerLogger }),
  ]);
  const bundlePath = path.join(workDir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  log(`temporal at ${temporal.address}, workflows bundled (${Math.round((Date.now() - started) / 1000)} s)`);

  process.env.TEST_DATABASE_URL = databaseUrl;
  process.env.TEST_TEMPORAL_ADDRESS = temporal.address;
  process.env.TEST_WORKFLOW_BUNDLE = bundlePath;
  (globalThis as Record<string, unknown>).__tidingsTeardown = async () => {
    await temporal.stop();
    const cleanup = new Client({ connectionString: adminUrl });
    await cleanup.connect();
    await cleanup.query(`drop database if exists ${dbName} with (force)`);
    await cleanup.end();
  };
}

const quietBundlerLogger = {
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: (message: string) => log(`bundler: ${message}`),
  error: (message: string) => log(`bundler: ${message}`),
  log: () => {},
};
