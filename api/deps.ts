import type { Logger } from 'pino';
import { createStripeProvider } from '../billing/stripe';
import type { Config } from '../config';
import { TrackBatches } from '../db/events/track';
import type { DeliveryHandoff } from '../db/messages/delivery-handoff';
import { EngineWakeups, type LocalEngines } from '../db/messages/engine-wakeups';
import { SendBatches } from '../db/messages/send';
import type { Orm } from '../db/orm';
import { linkSigningSecret, sessionSigningSecret } from '../db/projects/secrets';
import type { DnsLookup } from '../mail/dns';
import { oauthProvidersFromConfig } from '../oauth/from-config';
import { imageStorageFromConfig } from '../storage/from-config';
import type { TemporalGateway } from '../temporal/client';
import type { AppDeps } from './context';
import type { Foreground } from '../foreground';

/** Builds the API's dependencies from the configuration; every entry point (server, tests, benches) uses this. */
export async function buildAppDeps(parts: {
  config: Config;
  orm: Orm;
  temporal: TemporalGateway;
  logger: Logger;
  dns: DnsLookup;
  foreground?: Foreground;
  /** The engines of a worker in this process, woken directly after a commit. */
  localEngines?: LocalEngines;
  /** The delivery engine of a worker in this process, which takes /v1/send's emails already claimed. */
  handoff?: DeliveryHandoff;
}): Promise<AppDeps> {
  const { localEngines, handoff, ...shared } = parts;
  const em = parts.orm.em.fork();
  return {
    ...shared,
    linkSecret: await linkSigningSecret(em, parts.config.jwtSecret),
    sessionSecret: await sessionSigningSecret(em, parts.config.jwtSecret),
    payments: parts.config.stripe ? createStripeProvider(parts.config.stripe) : undefined,
    storage: imageStorageFromConfig(parts.config),
    oauth: oauthProvidersFromConfig(parts.config),
    tracking: new TrackBatches(parts.orm),
    sending: new SendBatches(parts.orm, handoff),
    wakeups: new EngineWakeups(parts.orm, (err) => parts.logger.warn({ err }, 'could not wake the outbox engines (they look within a second anyway)'), localEngines),
  };
}
