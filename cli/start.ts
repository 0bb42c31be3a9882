import type { Server } from 'node:http';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import pino from 'pino';
import { createApp } from '../api/app';
import type { Config } from '../config';
import { createOrm, migrate } from '../db/orm';
import { pruneRateLimitWindows } from '../db/rate-limit';
import { TemporalGateway } from '../temporal/client';
import { startWorker } from '../temporal/worker';
import { type Log, resolveDatabase, resolveTemporal } from './services';

export interface StartOptions {
  api: boolean;
  worker: boolean;
}

/** Runs the API and/or the worker until SIGINT/SIGTERM, then drains and stops in reverse order. */
export async function startService(config: Config, opts: StartOptions, log: Log): Promise<void> {
  const logger = pino({ level: config.logLevel });
  // The SDK logs every bundle build at INFO; warnings and errors are what an operator needs.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log(`shutdown: ${(err as Error).message}`));
  };
  try {
    const db = await resolveDatabase(config, log);
    stops.push(db.stop);
    const orm = await createOrm(db.url);
    stops.push(() => orm.close());
    if (opts.api) {
      const applied = await migrate(orm);
      if (applied.length) log(`Applied migrations: ${applied.join(', ')}`);
    }
    const temporal = await resolveTemporal(config, log);
    stops.push(temporal.stop);
    const settings = { address: temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue };

    if (opts.worker) {
      const worker = await startWorker(settings, { orm });
      stops.push(() => worker.shutdown());
      log(`Worker polling task queue "${settings.taskQueue}" on ${settings.address}`);
    }
    if (opts.api) {
      const gateway = await TemporalGateway.connect(settings);
      stops.push(() => gateway.close());
      const { app } = createApp({ config, orm, temporal: gateway, logger });
      const server: Server = await new Promise((resolve) => {
        const s = app.listen(config.port, () => resolve(s));
      });
      stops.push(() => new Promise((resolve) => server.close(() => resolve())));
      const pruner = setInterval(() => void pruneRateLimitWindows(orm.em.fork()).catch(() => {}), 60_000);
      pruner.unref();
      stops.push(async () => clearInterval(pruner));
      log(`API listening on ${config.publicUrl} (docs: ${config.publicUrl}/docs)`);
    }
    if (temporal.uiUrl) log(`Temporal Web UI: ${temporal.uiUrl}`);
  } catch (err) {
    await stopAll();
    throw err;
  }
  await new Promise<void>((resolve) => {
    const onSignal = (signal: string) => {
      log(`${signal} received, shutting down`);
      resolve();
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
  await stopAll();
}
