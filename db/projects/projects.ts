import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { type Project, ProjectSchema } from '../entities/project';
import { newId } from '../ids';
import { countHitSql, type RateLimitState, rateLimitState } from './rate-limit';
import { queryOne } from '../sql';

export type KeyKind = 'secret' | 'public';

export interface ProjectWithKeys {
  id: string;
  name: string;
  secretKey: string;
  publicKey: string;
}

export const hashKey = (key: string) => createHash('sha256').update(key).digest('hex');

function generateKeys() {
  const secretKey = `sk_${randomBytes(32).toString('hex')}`;
  const publicKey = `pk_${randomBytes(32).toString('hex')}`;
  return {
    secretKey,
    publicKey,
    hashes: {
      secretKeyHash: hashKey(secretKey),
      publicKeyHash: hashKey(publicKey),
      secretKeyPreview: secretKey.slice(0, 10),
      publicKeyPreview: publicKey.slice(0, 10),
    },
  };
}

/** The keys are returned here and on rotation only; the database keeps their hashes. */
export async function createProject(em: EntityManager, name: string): Promise<ProjectWithKeys> {
  const keys = generateKeys();
  const now = new Date();
  const project = em.create(ProjectSchema, {
    id: newId('prj'),
    name,
    disabled: false,
    createdAt: now,
    updatedAt: now,
    ...keys.hashes,
  });
  await em.persistAndFlush(project);
  return { id: project.id, name: project.name, secretKey: keys.secretKey, publicKey: keys.publicKey };
}

/** Both keys change in one UPDATE, so the old ones stop working at once on every API process. */
export async function rotateProjectKeys(em: EntityManager, projectId: string): Promise<ProjectWithKeys> {
  const project = await em.findOne(ProjectSchema, { id: projectId });
  if (!project) throw notFound('project');
  const keys = generateKeys();
  em.assign(project, keys.hashes);
  await em.flush();
  return { id: project.id, name: project.name, secretKey: keys.secretKey, publicKey: keys.publicKey };
}

/**
 * The project of an API key and, with `count`, the request counted in the project's rate-limit
 * window (the state comes back with it): every API request starts here, so both are one
 * statement. A request the key does not admit is not counted: pass `count` only when it would
 * be, given the project (`projectId`: the route's own; `writes`: a disabled project refuses them).
 */
export async function findProjectByKey(
  em: EntityManager,
  key: string,
  count?: { projectId?: string; writes: boolean },
): Promise<{ project: Project; kind: KeyKind; rateLimit?: RateLimitState } | null> {
  const kind: KeyKind | null = key.startsWith('sk_') ? 'secret' : key.startsWith('pk_') ? 'public' : null;
  if (!kind) return null;
  const row = await queryOne<{
    id: string;
    name: string;
    secret_key_hash: string;
    public_key_hash: string;
    secret_key_preview: string;
    public_key_preview: string;
    disabled: boolean;
    created_at: Date;
    updated_at: Date;
    count: number | null;
    reset: string | null;
  }>(
    em,
    `with p as (
       select id, name, secret_key_hash, public_key_hash, secret_key_preview, public_key_preview, disabled, created_at, updated_at
       from projects where ${kind === 'secret' ? 'secret_key_hash' : 'public_key_hash'} = ?
     ), hit as (${countHitSql('p.id', 'from p where ?::boolean and (?::text is null or p.id = ?) and not (p.disabled and ?::boolean)')})
     select p.*, hit.count, hit.reset from p left join hit on true`,
    [hashKey(key), !!count, count?.projectId ?? null, count?.projectId ?? null, count?.writes ?? false],
  );
  if (!row) return null;
  const project: Project = {
    id: row.id,
    name: row.name,
    secretKeyHash: row.secret_key_hash,
    publicKeyHash: row.public_key_hash,
    secretKeyPreview: row.secret_key_preview,
    publicKeyPreview: row.public_key_preview,
    disabled: row.disabled,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
  return { project, kind, ...(row.count !== null ? { rateLimit: rateLimitState({ count: row.count, reset: row.reset! }) } : {}) };
}
