import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, notFound } from '../../errors';
import { query, queryOne } from '../sql';

export const ROLES = ['OWNER', 'ADMIN', 'MEMBER'] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { MEMBER: 1, ADMIN: 2, OWNER: 3 };

export const roleAtLeast = (role: Role, needed: Role) => RANK[role] >= RANK[needed];

/** The user's role in the project, or null when they are not a member (or there is no such project). */
export async function memberRole(em: EntityManager, projectId: string, userId: string): Promise<Role | null> {
  const row = await queryOne<{ role: Role }>(em, `select role from project_members where project_id = ? and user_id = ?`, [
    projectId,
    userId,
  ]);
  return row?.role ?? null;
}

export interface MemberDto {
  userId: string;
  email: string;
  name: string | null;
  role: Role;
  joinedAt: string;
}

/** Who is asking: a member's session (with their role), or the project's secret key (counts as ADMIN). */
export interface Actor {
  userId?: string;
  role: Role;
}

const MEMBER_COLUMNS = `m.user_id, u.email, u.name, m.role, m.created_at`;
interface MemberRow {
  user_id: string;
  email: string;
  name: string | null;
  role: Role;
  created_at: Date;
}
const toMember = (r: MemberRow): MemberDto => ({
  userId: r.user_id,
  email: r.email,
  name: r.name,
  role: r.role,
  joinedAt: new Date(r.created_at).toISOString(),
});

const ownerImmutable = (message: string) =>
  new AppError(403, 'OWNER_IMMUTABLE', message, {
    suggestion:
      'A project has exactly one owner; the owner cannot be removed or demoted. The owner (signed in) hands ownership ' +
      'to another member with PATCH /projects/:id/members/:userId {"role": "OWNER"}.',
  });

const forbidden = (message: string) => new AppError(403, 'FORBIDDEN', message, { suggestion: 'Ask an owner or admin of the project.' });

/** The owner first, then by when they joined. */
export async function listMembers(em: EntityManager, projectId: string): Promise<MemberDto[]> {
  const rows = await query<MemberRow>(
    em,
    `select ${MEMBER_COLUMNS} from project_members m join users u on u.id = m.user_id
     where m.project_id = ? order by m.role = 'OWNER' desc, m.created_at, m.user_id`,
    [projectId],
  );
  return rows.map(toMember);
}

async function getMember(em: EntityManager, projectId: string, userId: string): Promise<MemberDto> {
  const row = await queryOne<MemberRow>(
    em,
    `select ${MEMBER_COLUMNS} from project_members m join users u on u.id = m.user_id where m.project_id = ? and m.user_id = ?`,
    [projectId, userId],
  );
  if (!row) throw notFound('member');
  return toMember(row);
}

/** Makes the creator of a project its owner; runs in the transaction that creates the project. */
export async function addOwner(em: EntityManager, projectId: string, userId: string): Promise<void> {
  await query(em, `insert into project_members (project_id, user_id, role) values (?, ?, 'OWNER')`, [projectId, userId]);
}

/** Adds an existing account to the project. Nobody becomes OWNER this way. */
export async function addMember(em: EntityManager, projectId: string, email: string, role: Role): Promise<MemberDto> {
  if (role === 'OWNER') throw ownerImmutable('Nobody can be added as OWNER: a project has one owner; add them, then hand ownership over');
  const user = await queryOne<{ id: string }>(em, 'select id from users where email = ?', [email.trim().toLowerCase()]);
  if (!user) {
    throw new AppError(404, 'USER_NOT_FOUND', `No account uses the email ${email.trim()}`, {
      suggestion: 'Ask them to sign up first (POST /auth/signup), then add them again.',
    });
  }
  const added = await queryOne(
    em,
    `insert into project_members (project_id, user_id, role) values (?, ?, ?) on conflict do nothing returning user_id`,
    [projectId, user.id, role],
  );
  if (!added) throw conflict('This user is already a member of the project', 'Change their role with PATCH /projects/:id/members/:userId.', 'ALREADY_MEMBER');
  return getMember(em, projectId, user.id);
}

/**
 * ADMIN ↔ MEMBER; or, asked by the owner's own session, OWNER: ownership passes to that member and
 * the former owner becomes ADMIN, in one transaction (the unique index keeps one owner throughout).
 * The owner's own role changes only by handing ownership over.
 */
export async function changeMemberRole(em: EntityManager, projectId: string, actor: Actor, userId: string, role: Role): Promise<MemberDto> {
  return em.transactional(async (tx) => {
    // Locks the project's member rows: two concurrent transfers or role changes go one after another.
    const rows = await query<{ user_id: string; role: Role }>(tx, 'select user_id, role from project_members where project_id = ? for update', [
      projectId,
    ]);
    const current = rows.find((r) => r.user_id === userId)?.role;
    if (!current) throw notFound('member');
    if (role === 'OWNER') {
      if (current === 'OWNER') return getMember(tx, projectId, userId);
      // The role read under the lock, not the one the request was authorised with: a hand-over
      // that committed meanwhile has made the asker ADMIN.
      const askerRole = actor.userId ? rows.find((r) => r.user_id === actor.userId)?.role : undefined;
      if (askerRole !== 'OWNER') throw ownerImmutable('Only the owner, signed in, can hand over ownership');
      await query(tx, `update project_members set role = 'ADMIN' where project_id = ? and role = 'OWNER'`, [projectId]);
      await query(tx, `update project_members set role = 'OWNER' where project_id = ? and user_id = ?`, [projectId, userId]);
      return getMember(tx, projectId, userId);
    }
    if (current === 'OWNER') throw ownerImmutable("The owner's role cannot be changed; hand ownership to another member instead");
    await query(tx, 'update project_members set role = ? where project_id = ? and user_id = ?', [role, projectId, userId]);
    return getMember(tx, projectId, userId);
  });
}

/** OWNER / ADMIN (or the secret key) remove anyone but the owner; any member may leave. */
export async function removeMember(em: EntityManager, projectId: string, actor: Actor, userId: string): Promise<void> {
  const self = actor.userId === userId;
  if (!self && !roleAtLeast(actor.role, 'ADMIN')) throw forbidden(`Removing another member needs the ADMIN role in the project; you are ${actor.role}`);
  const current = await memberRole(em, projectId, userId);
  if (!current) throw notFound('member');
  if (current === 'OWNER') throw ownerImmutable('The owner cannot be removed from the project (nor leave it)');
  await query(em, 'delete from project_members where project_id = ? and user_id = ?', [projectId, userId]);
}
