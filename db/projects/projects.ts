import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { type Project, ProjectSchema } from '../entities/project';
import { newId } from '../ids';
import { keysChanged } from './key-changes';
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

/** Both keys change in one UPDATE; API processes stop taking the old ones as db/projects/key-changes.ts says. */
export async function rotateProjectKeys(em: EntityManager, projectId: string): Promise<ProjectWithKeys> {
  const project = await em.findOne(ProjectSchema, { id: projectId });
  if (!project) throw notFound('project');
  const keys = generateKeys();
  em.assign(project, keys.hashes);
  await em.flush();
  keysChanged(project.id);
  return { id: project.id, name: project.name, secretKey: keys.secretKey, publicKey: keys.publicKey };
}

export interface KeyOwner {
  project: Project;
  kind: KeyKind;
}

const keyKind = (key: string): KeyKind | null => (key.startsWith('sk_') ? 'secret' : key.startsWith('pk_') ? 'public' : null);

/** The project of each API key, null for a key no project has; one statement for a batch of keys. */
export async function findProjectsByKeys(em: EntityManager, keys: readonly string[]): Promise<(KeyOwner | null)[]> {
  const kinds = keys.map(keyKind);
  const results: (KeyOwner | null)[] = keys.map(() => null);
  const known = keys.flatMap((key, ord) => (kinds[ord] ? [{ ord, hash: hashKey(key), secret: kinds[ord] === 'secret' }] : []));
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
  }>(
    em,
    // Each kind joined on its own unique index.
    `with k as (select * from unnest(?::int[], ?::text[], ?::boolean[]) as k(ord, hash, secret))
     select k.ord, p.* from k join projects p on p.secret_key_hash = k.hash where k.secret
     union all
     select k.ord, p.* from k join projects p on p.public_key_hash = k.hash where not k.secret`,
    [known.map((k) => k.ord), known.map((k) => k.hash), known.map((k) => k.secret)],
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
    results[row.ord] = { project, kind: kinds[row.ord]! };
  }
  return results;
}
