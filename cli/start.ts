import { createApp } from '../api/app';
import { listenApp } from '../api/server';
import { buildAppDeps } from '../api/deps';
import type { Config } from '../config';
import { Foreground } from '../foreground';
import type { DeliveryHandoff } from '../db/messages/delivery-handoff';
import type { LocalEngines } from '../db/messages/engine-wakeups';
import { createOrm, migrate } from '../db/orm';
import { pruneRateLimitWindows } from '../db/projects/rate-limit';
import { pruneRevokedSessions } from '../db/accounts/revoked-sessions';
import { createLogger } from '../logger';
import { createDnsLookup } from '../mail/dns';
import { mailerFromConfig } from '../mail/mailer';
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
    const orm = await createOrm(db.url, { pool: { max: config.databasePoolMax } });
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
    // One process for both roles: the API's requests go before the worker's background work.
    const foreground = opts.api && opts.worker ? new Foreground() : undefined;
    let localEngines: LocalEngines | undefined;
    let handoff: DeliveryHandoff | undefined;

    if (opts.worker) {
      const mailer = mailerFromConfig(config, log);
      stops.push(async () => mailer.close());
      const worker = await startWorker(settings, { orm, dns, mailer, config, foreground });
      stops.push(() => worker.shutdown());
      localEngines = worker.listener;
      handoff = worker.handoff;
      checkpoint();
      // startWorker returned once the server saw it poll: only now do the API, /health and the
      // ready line come up, so the first request that needs a worker finds one.
      log(`Worker polling task queue "${settings.taskQueue}" on ${settings.address}`);
    }
    if (opts.api) {
      const gateway = await TemporalGateway.connect(settings, config);
      stops.push(() => gateway.close());
      const { app } = createApp(await buildAppDeps({ config, orm, temporal: gateway, logger, dns, foreground, localEngines, handoff }));
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
      checkpoint();
      log(`API listening on ${config.publicUrl} (docs: ${config.publicUrl}/docs)`);
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
