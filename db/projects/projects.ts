import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { type Project, ProjectSchema } from '../entities/project';
import { newId } from '../ids';
import { countHitParams, countHitSql, type RateLimitState, rateLimitState } from './rate-limit';
import { query } from '../sql';

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

export interface KeyLookup {
  key: string;
  /**
   * Count the request in its project's rate-limit window, unless the key turns out not to admit
   * it (`projectId`: the route's own project; `writes`: a disabled project refuses them).
   */
  count?: { projectId?: string; writes: boolean };
}

export interface KeyOwner {
  project: Project;
  kind: KeyKind;
  /** Set when the request was counted: its own place in the window, as if counted alone. */
  rateLimit?: RateLimitState;
}

const keyKind = (key: string): KeyKind | null => (key.startsWith('sk_') ? 'secret' : key.startsWith('pk_') ? 'public' : null);

/**
 * The project of each API key (null for a key no project has) and, for the lookups that ask,
 * the request counted in the project's rate-limit window. Every API request starts here, so it
 * is one statement for a whole batch of requests (api/middleware/auth.ts coalesces concurrent
 * ones): the window of each project is bumped once by the number of requests the batch counts
 * for it, and each request gets the count it would have got alone, in the batch's order.
 */
export async function findProjectsByKeys(em: EntityManager, lookups: readonly KeyLookup[], now: Date): Promise<(KeyOwner | null)[]> {
  const kinds = lookups.map((l) => keyKind(l.key));
  const known = lookups.flatMap((l, i) => (kinds[i] ? [{ ...l, kind: kinds[i], ord: i }] : []));
  const results: (KeyOwner | null)[] = lookups.map(() => null);
  if (known.length === 0) return results;
  const rows = await query<{
    ord: number;
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
    `with r as (
       select * from unnest(?::int[], ?::text[], ?::boolean[], ?::boolean[], ?::text[], ?::boolean[]) as r(ord, hash, secret, counted, project_id, writes)
     ), p as (
       select r.ord, pr.*, r.counted and (r.project_id is null or pr.id = r.project_id) and not (pr.disabled and r.writes) as counts
       from r join projects pr on pr.secret_key_hash = r.hash where r.secret
       union all
       select r.ord, pr.*, r.counted and (r.project_id is null or pr.id = r.project_id) and not (pr.disabled and r.writes) as counts
       from r join projects pr on pr.public_key_hash = r.hash where not r.secret
     ), hit as (${countHitSql('id', 'from p where counts group by id', 'count(*)')})
     select p.ord, p.id, p.name, p.secret_key_hash, p.public_key_hash, p.secret_key_preview, p.public_key_preview, p.disabled,
            p.created_at, p.updated_at, hit.reset,
            hit.count - count(*) filter (where p.counts) over (partition by p.id order by p.ord rows between 1 following and unbounded following) as count
     from p left join hit on p.counts and hit.project_id = p.id`,
    [
      known.map((l) => l.ord),
      known.map((l) => hashKey(l.key)),
      known.map((l) => l.kind === 'secret'),
      known.map((l) => !!l.count),
      known.map((l) => l.count?.projectId ?? null),
      known.map((l) => l.count?.writes ?? false),
      ...countHitParams(now),
    ],
  );
  for (const row of rows) {
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
    const counted = row.count !== null ? { rateLimit: rateLimitState({ count: Number(row.count), reset: row.reset! }) } : {};
    results[row.ord] = { project, kind: kinds[row.ord]!, ...counted };
  }
  return results;
}
