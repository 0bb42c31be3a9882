import type { EntityManager } from '@mikro-orm/postgresql';
import type { ImageStorage } from '../../storage/storage';
import { AppError, notFound } from '../../errors';
import { type Actor, addOwner, type Role } from './members';
import { type ProjectRunner, stopProjectWork } from '../projects/reset';
import { keysChanged } from '../projects/key-changes';
import { createProject, type ProjectWithKeys } from '../projects/projects';
import { query, queryOne } from '../sql';

/** The signed-in user as GET /users/@me shows them, with the projects they belong to. */
export interface MeDto {
  id: string;
  email: string;
  name: string | null;
  emailVerified: boolean;
  createdAt: string;
  memberships: { projectId: string; projectName: string; role: Role }[];
}

/** A project as one of its members sees it in their list: key previews only, never the keys. */
export interface UserProjectDto {
  id: string;
  name: string;
  role: Role;
  secretKeyPreview: string;
  publicKeyPreview: string;
  disabled: boolean;
  disabledReason: string | null;
  disabledAt: string | null;
  createdAt: string;
}

interface UserProjectRow {
  id: string;
  name: string;
  role: Role;
  secret_key_preview: string;
  public_key_preview: string;
  disabled: boolean;
  disabled_reason: string | null;
  disabled_at: Date | null;
  created_at: Date;
}

/** The columns of a UserProjectRow, with the role taken from `role` (an SQL expression). */
const projectColumns = (role: string) => `p.id, p.name, ${role} as role, p.secret_key_preview, p.public_key_preview, p.disabled,
  p.disabled_reason, p.disabled_at, p.created_at`;

const toUserProject = (r: UserProjectRow): UserProjectDto => ({
  id: r.id,
  name: r.name,
  role: r.role,
  secretKeyPreview: r.secret_key_preview,
  publicKeyPreview: r.public_key_preview,
  disabled: r.disabled,
  disabledReason: r.disabled_reason,
  disabledAt: r.disabled_at ? new Date(r.disabled_at).toISOString() : null,
  createdAt: new Date(r.created_at).toISOString(),
});

export async function getMe(em: EntityManager, userId: string): Promise<MeDto> {
  const user = await queryOne<{ id: string; email: string; name: string | null; verified: boolean; created_at: Date }>(
    em,
    'select id, email, name, email_verified_at is not null as verified, created_at from users where id = ?',
    [userId],
  );
  if (!user) throw notFound('user');
  const memberships = await query<{ project_id: string; name: string; role: Role }>(
    em,
    `select m.project_id, p.name, m.role from project_members m join projects p on p.id = m.project_id
     where m.user_id = ? order by p.created_at, p.id`,
    [userId],
  );
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    emailVerified: user.verified,
    createdAt: new Date(user.created_at).toISOString(),
    memberships: memberships.map((m) => ({ projectId: m.project_id, projectName: m.name, role: m.role })),
  };
}

/** The user's projects, oldest first. */
export async function listUserProjects(em: EntityManager, userId: string): Promise<UserProjectDto[]> {
  const rows = await query<UserProjectRow>(
    em,
    `select ${projectColumns('m.role')} from project_members m join projects p on p.id = m.project_id
     where m.user_id = ? order by p.created_at, p.id`,
    [userId],
  );
  return rows.map(toUserProject);
}

export async function getUserProject(em: EntityManager, userId: string, projectId: string): Promise<UserProjectDto> {
  const row = await queryOne<UserProjectRow>(
    em,
    `select ${projectColumns('m.role')} from project_members m join projects p on p.id = m.project_id where m.user_id = ? and p.id = ?`,
    [userId, projectId],
  );
  if (!row) throw notFound('project');
  return toUserProject(row);
}

/** A new project owned by the user; its keys are returned here and on rotation only. */
export async function createUserProject(em: EntityManager, userId: string, name: string): Promise<UserProjectDto & ProjectWithKeys> {
  return em.transactional(async (tx) => {
    const created = await createProject(tx, name);
    await addOwner(tx, created.id, userId);
    return { ...(await getUserProject(tx, userId, created.id)), secretKey: created.secretKey, publicKey: created.publicKey };
  });
}

/** `tidings project create <name> --owner <email>`: the project of an existing account, as if they made it. */
export async function createProjectForOwner(em: EntityManager, ownerEmail: string, name: string): Promise<UserProjectDto & ProjectWithKeys> {
  const email = ownerEmail.trim().toLowerCase();
  const user = await queryOne<{ id: string }>(em, 'select id from users where email = ?', [email]);
  if (!user) {
    throw new AppError(404, 'USER_NOT_FOUND', `No account uses the email ${email}; sign up first (POST /auth/signup), then create the project`);
  }
  return createUserProject(em, user.id, name);
}

/** Renames the project; the answer shows it with the asker's role (a secret key's: ADMIN). */
export async function renameProject(em: EntityManager, projectId: string, name: string, asker: Actor): Promise<UserProjectDto> {
  const row = await queryOne<UserProjectRow>(
    em,
    `update projects p set name = ?, updated_at = now() where id = ?
     returning ${projectColumns('?::text')}`,
    [name, projectId, asker.role],
  );
  if (!row) throw notFound('project');
  return toUserProject(row);
}

/**
 * Deletes the project and, by the schema's cascades, everything in it (contacts, emails, members,
 * suspensions, billing rows...). Its journeys and campaigns are stopped first, its uploaded images
 * removed from storage, and its domains' verification workflows ended, so nothing keeps running
 * or stays published for a project that is gone.
 */
export async function deleteProject(
  em: EntityManager,
  projectId: string,
  runner: ProjectRunner & { stopDomainVerification(domainId: string): Promise<void> },
  storage: Pick<ImageStorage, 'removeProject'>,
): Promise<void> {
  await stopProjectWork(em, projectId, runner);
  // Before the rows: should the storage fail, the project is still there and the delete can be retried.
  await storage.removeProject(projectId);
  const domains = await query<{ id: string }>(em, 'select id from domains where project_id = ?', [projectId]);
  await query(em, 'delete from projects where id = ?', [projectId]);
  keysChanged(projectId);
  // After the delete: a verification check that finds its domain gone ends its workflow anyway.
  for (const d of domains) await runner.stopDomainVerification(d.id);
}
