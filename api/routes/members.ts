import { z } from 'zod';
import { addMember, changeMemberRole, listMembers, removeMember } from '../../db/accounts/members';
import type { AppDeps } from '../context';
import { actorOf } from '../middleware/auth';
import type { RouteRegistry } from '../routing';
import { addMemberBody, changeRoleBody, memberParams, memberSchema, projectIdParam } from '../schemas/accounts';

/**
 * Members and roles. Any member (or the project's secret key) lists them; OWNER / ADMIN (the key
 * counts as ADMIN) add, re-role and remove; any member may remove themselves. The owner stays
 * until they hand ownership to another member.
 */
export function registerMemberRoutes(api: RouteRegistry, _deps: AppDeps): void {
  const tag = 'Members';

  api.add({
    method: 'get',
    path: '/projects/:id/members',
    tag,
    summary: 'Members of the project with their roles (owner first)',
    auth: 'secret',
    projectParam: 'id',
    params: projectIdParam,
    response: z.array(memberSchema),
    handler: ({ scope, project }) => listMembers(scope.em, project.id),
  });

  api.add({
    method: 'post',
    path: '/projects/:id/members',
    tag,
    summary: 'Add a user who has an account (404 USER_NOT_FOUND otherwise) as ADMIN or MEMBER (OWNER or ADMIN)',
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: projectIdParam,
    body: addMemberBody,
    response: memberSchema,
    status: 201,
    handler: ({ scope, project, body }) => addMember(scope.em, project.id, body.email, body.role),
  });

  api.add({
    method: 'patch',
    path: '/projects/:id/members/:userId',
    tag,
    summary:
      "Change a member's role between ADMIN and MEMBER (OWNER or ADMIN); role OWNER, asked by the owner's session, hands ownership over (the former owner becomes ADMIN)",
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: memberParams,
    body: changeRoleBody,
    response: memberSchema,
    handler: ({ scope, project, auth, user, params, body }) =>
      changeMemberRole(scope.em, project.id, actorOf(auth, user), params.userId, body.role),
  });

  api.add({
    method: 'delete',
    path: '/projects/:id/members/:userId',
    tag,
    summary: 'Remove a member (OWNER or ADMIN), or leave the project (any member); the owner cannot be removed',
    auth: 'secret',
    projectParam: 'id',
    params: memberParams,
    handler: async ({ scope, project, auth, user, params }) => {
      await removeMember(scope.em, project.id, actorOf(auth, user), params.userId);
    },
  });
}

