import { z } from 'zod';
import { rotateProjectKeys } from '../../db/projects/projects';
import { projectSecurity } from '../../db/projects/security';
import { createUserProject, getMe, listUserProjects, renameProject } from '../../db/accounts/user-projects';
import type { AppDeps } from '../context';
import { actorOf } from '../middleware/auth';
import type { RouteRegistry } from '../routing';
import {
  createdProjectSchema,
  deletedSchema,
  meSchema,
  projectIdParam,
  projectKeysSchema,
  projectNameBody,
  resetProjectBody,
  resetSummarySchema,
  securitySchema,
  userProjectSchema,
} from '../schemas/accounts';
import { removeProject, resetProjectData } from '../use-cases/projects';

/**
 * The signed-in user and their projects. `/users/@me` and the list belong to a user: session only
 * (a key gets 401). `/users/@me/projects/:id…` belong to the project: a member's session (the
 * middleware checks membership and the role first) or the project's own secret key, which counts
 * as ADMIN, so it may do everything here but delete the project.
 */
export function registerUserRoutes(api: RouteRegistry, deps: AppDeps): void {
  const tag = 'Users and projects';

  api.add({
    method: 'get',
    path: '/users/@me',
    tag,
    summary: 'The signed-in user, with the projects they belong to',
    auth: 'session',
    response: meSchema,
    handler: ({ scope, user }) => getMe(scope.em, user.id),
  });

  api.add({
    method: 'get',
    path: '/users/@me/projects',
    tag,
    summary: "The user's projects with their role (key previews only)",
    auth: 'session',
    response: z.array(userProjectSchema),
    handler: ({ scope, user }) => listUserProjects(scope.em, user.id),
  });

  api.add({
    method: 'post',
    path: '/users/@me/projects',
    tag,
    summary: 'Create a project owned by the user; returns its keys, shown this once',
    auth: 'session',
    body: projectNameBody,
    response: createdProjectSchema,
    status: 201,
    handler: ({ scope, user, body }) => createUserProject(scope.em, user.id, body.name),
  });

  api.add({
    method: 'patch',
    path: '/users/@me/projects/:id',
    tag,
    summary: 'Rename the project (OWNER or ADMIN)',
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: projectIdParam,
    body: projectNameBody,
    response: userProjectSchema,
    handler: ({ scope, auth, user, params, body }) => renameProject(scope.em, params.id, body.name, actorOf(auth, user)),
  });

  api.add({
    method: 'delete',
    path: '/users/@me/projects/:id',
    tag,
    summary: 'Delete the project and everything in it (OWNER); its running journeys and campaigns are cancelled first',
    auth: 'secret',
    projectParam: 'id',
    role: 'OWNER',
    params: projectIdParam,
    response: deletedSchema,
    handler: async ({ scope, params }) => {
      await removeProject(deps, scope.em, params.id);
      return { id: params.id, deleted: true as const };
    },
  });

  api.add({
    method: 'post',
    path: '/users/@me/projects/:id/regenerate-keys',
    tag,
    summary: 'Replace both keys (OWNER or ADMIN); the old ones stop working at once on the answering API process, within a second on others',
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: projectIdParam,
    response: projectKeysSchema,
    handler: ({ scope, params }) => rotateProjectKeys(scope.em, params.id),
  });

  api.add({
    method: 'get',
    path: '/users/@me/projects/:id/security',
    tag,
    summary: 'Bounce and complaint rates (7 days, all time), project status and recent suspensions',
    auth: 'secret',
    projectParam: 'id',
    params: projectIdParam,
    response: securitySchema,
    handler: ({ scope, params }) => projectSecurity(scope.em, params.id),
  });

  api.add({
    method: 'post',
    path: '/users/@me/projects/:id/reset',
    tag,
    summary:
      "Irreversibly delete the project's data (OWNER or ADMIN; `confirm` must be the project's exact name). " +
      'Keeps the project, keys, members, domains and suppression list',
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: projectIdParam,
    body: resetProjectBody,
    response: resetSummarySchema,
    handler: ({ scope, params, body }) => resetProjectData(deps, scope.em, params.id, body.confirm),
  });
}
