import type { Logger } from 'pino';
import { createStripeProvider } from '../billing/stripe';
import type { Config } from '../config';
import { type Clock, systemClock } from '../db/clock';
import { TrackBatches } from '../db/events/track';
import { SendBatches } from '../db/messages/send';
import type { Orm } from '../db/orm';
import { linkSigningSecret, sessionSigningSecret } from '../db/projects/secrets';
import type { DnsLookup } from '../mail/dns';
import { oauthProvidersFromConfig } from '../oauth/from-config';
import { imageStorageFromConfig } from '../storage/from-config';
import type { TemporalGateway } from '../temporal/client';
import { EngineWakeups } from '../temporal/wakeups';
import type { AppDeps } from './context';
import { ApiKeys } from './middleware/api-keys';
import { RateLimiter } from './middleware/rate-limit';

/** Builds the API's dependencies from the configuration; every entry point (server, tests, benches) uses this. */
export async function buildAppDeps(parts: {
  config: Config;
  orm: Orm;
  temporal: TemporalGateway;
  logger: Logger;
  dns: DnsLookup;
  /** The system clock unless a test moves its own. */
  clock?: Clock;
}): Promise<AppDeps> {
  const em = parts.orm.em.fork();
  const clock = parts.clock ?? systemClock;
  return {
    ...parts,
    clock,
    keys: new ApiKeys(parts.orm, clock),
    rateLimiter: new RateLimiter(parts.orm, parts.config.rateLimitPerMinute, clock),
    linkSecret: await linkSigningSecret(em, parts.config.jwtSecret),
    sessionSecret: await sessionSigningSecret(em, parts.config.jwtSecret),
    payments: parts.config.stripe ? createStripeProvider(parts.config.stripe) : undefined,
    storage: imageStorageFromConfig(parts.config),
    oauth: oauthProvidersFromConfig(parts.config),
    tracking: new TrackBatches(parts.orm),
    sending: new SendBatches(parts.orm),
    wakeups: new EngineWakeups(parts.orm, (err) => parts.logger.warn({ err }, 'could not wake the outbox engines (they look within a second anyway)')),
  };
}
