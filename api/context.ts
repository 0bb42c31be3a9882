import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { PaymentProvider } from '../billing/provider';
import type { Config } from '../config';
import type { Clock } from '../db/clock';
import type { ApiKeys } from './middleware/api-keys';
import type { RateLimiter } from './middleware/rate-limit';
import type { EngineWakeups } from '../temporal/wakeups';
import type { TrackBatches } from '../db/events/track';
import type { SendBatches } from '../db/messages/send';
import type { Orm } from '../db/orm';
import type { Project } from '../db/entities/project';
import type { Role } from '../db/accounts/members';
import type { KeyKind } from '../db/projects/projects';
import type { SessionUser } from '../db/accounts/users';
import type { DnsLookup } from '../mail/dns';
import type { ImageStorage } from '../storage/storage';
import type { TemporalGateway } from '../temporal/client';
import type { OAuthProvider, OAuthProviderId } from '../oauth/provider';

/** What the API needs from the outside world; built once in server.ts (or by a test). */
export interface AppDeps {
  config: Config;
  orm: Orm;
  /** Temporal's client and task queue; workflows are started through temporal/<feature>/lifecycle.ts. */
  temporal: TemporalGateway;
  logger: Logger;
  /** The service's one DNS resolver (DNS_SERVERS). */
  dns: DnsLookup;
  /** Signs unsubscribe / subscribe / manage links (db/projects/secrets.ts). */
  linkSecret: string;
  /** Signs session JWTs (db/projects/secrets.ts). */
  sessionSecret: string;
  /** Checkout, portal, invoices and webhooks; undefined when billing is off (no STRIPE_* settings). */
  payments: PaymentProvider | undefined;
  /** Where uploaded images are kept: local disk, or S3 when configured. */
  storage: ImageStorage;
  /** Sign-in providers that are configured (none by default). */
  oauth: Partial<Record<OAuthProviderId, OAuthProvider>>;
  /** Wakes the delivery engine and the trigger dispatcher once a request's outbox rows are committed. */
  wakeups: EngineWakeups;
  /** Tracks events of concurrent requests in shared statements (db/events/track.ts). */
  tracking: TrackBatches;
  /** Writes /v1/send's common case for concurrent requests in shared statements (db/messages/send.ts). */
  sending: SendBatches;
  /** The time for rules counted in windows: the rate limit, sign-in and account-mail attempts. */
  clock: Clock;
  /** API keys → projects, cached per process (middleware/api-keys.ts). */
  keys: ApiKeys;
  /** Places requests in their project's window of the rate limit (middleware/rate-limit.ts). */
  rateLimiter: RateLimiter;
}

export interface AuthContext {
  project: Project;
  /** How the caller reached the project: one of its keys, or a member's session. */
  via: KeyKind | 'session';
  /** The member's role; undefined for keys. */
  role?: Role;
}

export interface RequestScope {
  em: EntityManager;
  auth?: AuthContext;
  user?: SessionUser;
}
