import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import type { Config } from '../config';
import { startEmbeddedPostgres } from './embedded-postgres';
import { ensureSearchAttributes, findTemporalCli, isTemporalReachable, startTemporalDevServer } from './temporal-server';

export type Log = (msg: string) => void;

export interface ResolvedDatabase {
  url: string;
  embedded: boolean;
  stop(): Promise<void>;
}

/** DATABASE_URL when set; otherwise the embedded PostgreSQL under DATA_DIR (started or reused). */
export async function resolveDatabase(config: Config, log: Log): Promise<ResolvedDatabase> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, stop: async () => {} };
  mkdirSync(config.dataDir, { recursive: true });
  log(`DATABASE_URL is not set: using an embedded PostgreSQL on 127.0.0.1:${config.embeddedPostgresPort}, data in ${path.resolve(config.dataDir, 'postgres')}`);
  const pg = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPostgresPort, log });
  return { url: pg.url, embedded: true, stop: () => pg.stop() };
}

export interface ResolvedTemporal {
  address: string;
  uiUrl: string | undefined;
  stop(): Promise<void>;
}

/**
 * TEMPORAL_ADDRESS when set; otherwise a local dev server (reused if one already answers on
 * TEMPORAL_DEV_PORT), its state persisted under DATA_DIR so executions survive a restart.
 */
export async function resolveTemporal(config: Config, log: Log): Promise<ResolvedTemporal> {
  const { namespace } = config.temporal;
  if (config.temporal.address) {
    await registerSearchAttributes(config.temporal.address, namespace, log);
    return { address: config.temporal.address, uiUrl: undefined, stop: async () => {} };
  }
  const local = `127.0.0.1:${config.temporal.devPort}`;
  const uiUrl = `http://localhost:${config.temporal.uiPort}`;
  if (await isTemporalReachable(local, namespace)) {
    log(`TEMPORAL_ADDRESS is not set: reusing the Temporal server already running at ${local}`);
    await registerSearchAttributes(local, namespace, log);
    return { address: local, uiUrl, stop: async () => {} };
  }
  log('TEMPORAL_ADDRESS is not set: starting a local Temporal dev server');
  const cliPath = await findTemporalCli({ cliPath: config.temporal.cliPath, allowBuild: true, log });
  mkdirSync(config.dataDir, { recursive: true });
  const server = await startTemporalDevServer({
    cliPath,
    port: config.temporal.devPort,
    uiPort: config.temporal.uiPort,
    dbFile: path.resolve(config.dataDir, 'temporal.db'),
    namespace,
    readinessTimeoutMs: 120_000,
    log,
    logFile: path.resolve(config.dataDir, 'temporal.log'),
  });
  return { address: server.address, uiUrl: server.uiUrl, stop: () => server.stop() };
}

async function registerSearchAttributes(address: string, namespace: string, log: Log): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    await ensureSearchAttributes(connection, namespace);
  } catch (err) {
    // A managed cluster may not allow this; the operator then registers them (docs/production.md).
    log(`Could not register search attributes on ${address}: ${(err as Error).message}`);
  } finally {
    await connection.close();
  }
}
