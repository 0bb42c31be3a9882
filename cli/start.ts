import { createApp } from '../api/app';
import { listenApp } from '../api/server';
import { buildAppDeps } from '../api/deps';
import type { Config } from '../config';
import { createOrm, migrate } from '../db/orm';
import { pruneRateLimitWindows } from '../db/projects/rate-limit';
import { pruneRevokedSessions } from '../db/accounts/revoked-sessions';
import { analyzeGrownTables, STATISTICS_CHECK_MS } from '../db/statistics';
import { createLogger } from '../logger';
import { loadBounceAddresses, startReturnPaths } from '../db/domains/return-paths';
import { createDnsLookup } from '../mail/dns';
import { startReceiver } from '../mail/inbound/receiver';
import { mailerFromConfig } from '../mail/mailer';
import { inboundHandler } from '../api/use-cases/inbound';
import { TemporalGateway } from '../temporal/client';
import { installSdkLogging, startWorker } from '../temporal/worker';
import { StartupError } from './errors';
import { type Log, resolveDatabase, resolveTemporal } from './services';

export interface StartOptions {
  api: boolean;
  worker: boolean;
}

/** Thrown between startup steps when a stop signal arrived meanwhile. */
class Interrupted extends Error {}

/** Runs the API and/or the worker until SIGINT/SIGTERM, then drains and stops in reverse order. */
export async function startService(config: Config, opts: StartOptions, log: Log): Promise<void> {
  const logger = createLogger(config);
  installSdkLogging(logger);
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log(`shutdown: ${(err as Error).message}`));
  };

  // Signals are handled from the very start and until everything is stopped: a SIGTERM while
  // PostgreSQL or Temporal is still starting must stop what is already up, and a repeated signal
  // (a second Ctrl-C, or tsx relaying one the process also got directly) must not take Node's
  // default action and exit at once, leaving the detached Temporal dev server running.
  let signalled: string | undefined;
  let wake: () => void = () => undefined;
  const stopRequested = new Promise<void>((resolve) => (wake = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return log(`${signal} received again; still shutting down`);
    signalled = signal;
    log(`${signal} received, shutting down`);
    wake();
  };
  // Never removed: a relayed copy of the signal can land after everything has stopped, and without
  // a handler it would kill the process (exit 143) before the CLI exits with 0.
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const checkpoint = () => {
    if (signalled) throw new Interrupted();
  };

  try {
    const db = await resolveDatabase(config, log);
    stops.push(db.stop);
    checkpoint();
    const orm = await createOrm(db.url, { pool: { max: config.databasePoolMax } }, config.temporal.taskQueue);
    stops.push(() => orm.close());
    if (opts.api) {
      const applied = await migrate(orm);
      if (applied.length) log(`Applied migrations: ${applied.join(', ')}`);
    }
    checkpoint();
    const temporal = await resolveTemporal(config, log);
    stops.push(temporal.stop);
    checkpoint();
    const settings = { address: temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue };
    const dns = createDnsLookup({ servers: config.dnsServers });
    const bounces = await loadBounceAddresses(orm, config);

    if (opts.worker) {
      const returnPaths = await startReturnPaths(orm, bounces, config, (err) => logger.warn({ err }, 'could not reload the return-path domains'));
      stops.push(async () => returnPaths.stop());
      const mailer = mailerFromConfig(config, log, returnPaths);
      stops.push(async () => mailer.close());
      const worker = await startWorker(settings, { orm, dns, mailer, config });
      stops.push(() => worker.shutdown());
      checkpoint();
      // startWorker returned once the server saw it poll: only now do the API, /health and the
      // ready line come up, so the first request that needs a worker finds one.
      log(`Worker polling task queue "${settings.taskQueue}" on ${settings.address}`);
    }
    if (opts.api) {
      const gateway = await TemporalGateway.connect(settings, config);
      stops.push(() => gateway.close());
      const deps = await buildAppDeps({ config, orm, temporal: gateway, logger, dns });
      const { app } = createApp(deps);
      const server = await listenApp(app, config.port).catch((err: Error) => {
        throw new StartupError(`The API cannot listen on port ${config.port}: ${err.message}`);
      });
      stops.push(() => new Promise((resolve) => server.close(() => resolve())));
      const pruner = setInterval(() => {
        void pruneRateLimitWindows(orm.em.fork()).catch(() => {});
        void pruneRevokedSessions(orm.em.fork()).catch(() => {});
      }, 60_000);
      pruner.unref();
      stops.push(async () => clearInterval(pruner));
      // While tables grow from empty, their plans follow (db/statistics.ts).
      let analyzing = false;
      const statistics = setInterval(() => {
        if (analyzing) return;
        analyzing = true;
        analyzeGrownTables(orm.em.fork())
          .catch((err) => logger.warn({ err }, 'could not analyze the tables that grew'))
          .finally(() => (analyzing = false));
      }, STATISTICS_CHECK_MS);
      statistics.unref();
      stops.push(async () => clearInterval(statistics));
      checkpoint();
      log(`API listening on ${config.publicUrl} (docs: ${config.publicUrl}/docs)`);
      if (config.inbound) {
        const { port, host, tls, maxMessageBytes } = config.inbound;
        const receiver = await startReceiver(
          { port, host, tls, maxMessageBytes, name: config.returnPath.mxHost, onError: (err) => logger.warn({ err }, 'inbound SMTP') },
          inboundHandler({ orm, storage: deps.storage, bounces, logger }),
        ).catch((err: Error) => {
          throw new StartupError(`The inbound SMTP receiver cannot listen on port ${port}: ${err.message}`);
        });
        stops.push(() => receiver.close());
        checkpoint();
        log(`Inbound SMTP listening on port ${receiver.port}${tls ? ' (STARTTLS)' : ''}`);
      }
    }
    if (temporal.uiUrl) log(`Temporal Web UI: ${temporal.uiUrl}`);
  } catch (err) {
    await stopAll();
    if (err instanceof Interrupted) return;
    // A group-wide signal also reaches what is starting: PostgreSQL, or the Temporal dev server in
    // the instant between its spawn and it leaving our process group. Its failure is then the stop
    // that was asked for, not a start-up error.
    if (signalled) return log(`Start-up cut short by ${signalled}: ${(err as Error).message.split('\n')[0]}`);
    throw err;
  }
  await stopRequested;
  await stopAll();
}
