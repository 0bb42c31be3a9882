import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Config } from '../config';
import type { Orm } from '../db/orm';
import type { Project } from '../db/entities/project';
import type { KeyKind } from '../db/projects';
import type { DnsLookup } from '../mail/dns';
import type { TemporalGateway } from '../temporal/client';

/** What the API needs from the outside world; built once in server.ts (or by a test). */
export interface AppDeps {
  config: Config;
  orm: Orm;
  temporal: TemporalGateway;
  logger: Logger;
  /** The service's one DNS resolver (DNS_SERVERS). */
  dns: DnsLookup;
  /** Signs unsubscribe / subscribe / manage links (db/secrets.ts). */
  linkSecret: string;
}

export interface AuthContext {
  project: Project;
  keyKind: KeyKind;
}

export interface RequestScope {
  em: EntityManager;
  auth?: AuthContext;
}
