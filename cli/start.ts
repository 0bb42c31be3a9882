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
import { lowerPriority } from './priority';
import { type Log, resolveDatabase, resolveTemporal } from './services';
import { Lifecycle } from './lifecycle';

export type Role = 'api' | 'worker';

/**
 * Runs one role, the API or the worker, until SIGINT/SIGTERM, then drains and stops in reverse
 * order. Under `tidings start` (cli/supervise.ts) it is a child process that reports ready over
 * the IPC channel and never outlives its supervisor.
 */
export async function startService(config: Config, role: Role, log: Log): Promise<void> {
  const logger = createLogger(config);
  installSdkLogging(logger);
  const life = new Lifecycle(log);
  // Requests first: where the worker shares the machine with the API, delivery and journeys take
  // the CPU the requests leave (docs/configuration.md, WORKER_NICENESS).
  if (role === 'worker') lowerPriority(config.workerNiceness);
  const supervised = process.send !== undefined;
  // The supervisor only goes without stopping this process first when it was killed or crashed:
  // this process goes the same way, at once, rather than outlive it holding the port and the leases.
  if (supervised) {
    process.once('disconnect', () => {
      log('The supervising process is gone: exiting at once');
      process.exit(1);
    });
  }

  const started = await life.startUp(async () => {
    const db = await resolveDatabase(config, log);
    life.onStop(db.stop);
    life.checkpoint();
    const orm = await createOrm(db.url, { pool: { max: config.databasePoolMax } }, config.temporal.taskQueue);
    life.onStop(() => orm.close());
    if (role === 'api') {
      const applied = await migrate(orm);
      if (applied.length) log(`Applied migrations: ${applied.join(', ')}`);
    }
    life.checkpoint();
    const temporal = await resolveTemporal(config, log);
    life.onStop(temporal.stop);
    life.checkpoint();
    const settings = { address: temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue };
    const dns = createDnsLookup({ servers: config.dnsServers });
    const bounces = await loadBounceAddresses(orm, config);

    if (role === 'worker') {
      const returnPaths = await startReturnPaths(orm, bounces, config, (err) => logger.warn({ err }, 'could not reload the return-path domains'));
      life.onStop(async () => returnPaths.stop());
      const mailer = mailerFromConfig(config, log, returnPaths);
      life.onStop(async () => mailer.close());
      const worker = await startWorker(settings, { orm, dns, mailer, config });
      life.onStop(() => worker.shutdown());
      life.checkpoint();
      // startWorker returned once the server saw it poll: the supervisor starts the API only after
      // this process is ready, so the first request that needs a worker finds one.
      log(`Worker polling task queue "${settings.taskQueue}" on ${settings.address}`);
    }
    if (role === 'api') {
      const gateway = await TemporalGateway.connect(settings, config);
      life.onStop(() => gateway.close());
      const deps = await buildAppDeps({ config, orm, temporal: gateway, logger, dns });
      const { app } = createApp(deps);
      const server = await listenApp(app, config.port).catch((err: Error) => {
        throw new StartupError(`The API cannot listen on port ${config.port}: ${err.message}`);
      });
      life.onStop(() => new Promise((resolve) => server.close(() => resolve())));
      const pruner = setInterval(() => {
        void pruneRateLimitWindows(orm.em.fork()).catch(() => {});
        void pruneRevokedSessions(orm.em.fork()).catch(() => {});
      }, 60_000);
      pruner.unref();
      life.onStop(async () => clearInterval(pruner));
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
      life.onStop(async () => clearInterval(statistics));
      life.checkpoint();
      log(`API listening on ${config.publicUrl} (docs: ${config.publicUrl}/docs)`);
      if (config.inbound) {
        const { port, host, tls, maxMessageBytes } = config.inbound;
        const receiver = await startReceiver(
          { port, host, tls, maxMessageBytes, name: config.returnPath.mxHost, onError: (err) => logger.warn({ err }, 'inbound SMTP') },
          inboundHandler({ orm, storage: deps.storage, bounces, logger }),
        ).catch((err: Error) => {
          throw new StartupError(`The inbound SMTP receiver cannot listen on port ${port}: ${err.message}`);
        });
        life.onStop(() => receiver.close());
        life.checkpoint();
        log(`Inbound SMTP listening on port ${receiver.port}${tls ? ' (STARTTLS)' : ''}`);
      }
    }
    if (temporal.uiUrl) log(`Temporal Web UI: ${temporal.uiUrl}`);
  });
  if (!started) return;
  if (supervised) process.send!({ ready: true });
  await life.stopRequested;
  await life.stopAll();
}
