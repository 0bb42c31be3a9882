import { projectSecurity } from '../../db/projects/security';
import { setupState } from '../../db/projects/setup-state';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { projectIdParam, securitySchema, setupStateSchema } from '../schemas/accounts';

/** Project pages of the dashboard: any member, or the project's secret key (another project's key: 403). */
export function registerProjectRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/projects/:id/setup-state',
    tag: 'Projects',
    summary: 'Onboarding checklist: verified domain, template, contact, sent email, enabled workflow',
    auth: 'secret',
    projectParam: 'id',
    params: projectIdParam,
    response: setupStateSchema,
    handler: ({ scope, project }) => setupState(scope.em, project.id),
  });

  api.add({
    method: 'get',
    path: '/projects/:id/security',
    tag: 'Projects',
    summary: 'Bounce and complaint rates (7 days, all time), project status and recent suspensions',
    auth: 'secret',
    projectParam: 'id',
    params: projectIdParam,
    response: securitySchema,
    handler: ({ scope, project }) => projectSecurity(scope.em, project.id),
  });
}
