import type { EntityManager } from '@mikro-orm/postgresql';
import { queryOne } from './sql';

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
