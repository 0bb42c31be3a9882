import type { EntityManager } from '@mikro-orm/postgresql';
import type { Request, RequestHandler } from 'express';
import { type Actor, memberRole, roleAtLeast } from '../../db/accounts/members';
import type { SessionUser } from '../../db/accounts/users';
import type { Orm } from '../../db/orm';
import type { Project } from '../../db/entities/project';
import { ProjectSchema } from '../../db/entities/project';
import { AppError } from '../../errors';
import type { AuthContext, RequestScope } from '../context';
import type { AnyRouteSpec } from '../routing';
import { scopeOf } from '../routing';
import { readSession } from '../session';
import type { ApiKeys } from './api-keys';

type GuardedRoute = Pick<AnyRouteSpec, 'auth' | 'projectParam' | 'role' | 'method'>;

const missing = (sessionAllowed: boolean) =>
  new AppError(401, 'MISSING_AUTH', sessionAllowed ? 'No API key or session was provided' : 'No session was provided', {
    suggestion: sessionAllowed
      ? 'Send your key in the header Authorization: Bearer <key>, or sign in with POST /auth/login.'
      : 'Sign in with POST /auth/login; this endpoint belongs to a user, not to a project key.',
  });

const invalid = (message = 'The API key is not valid') =>
  new AppError(401, 'INVALID_API_KEY', message, {
    suggestion: 'Use a current secret key (sk_…) of your project; keys stop working when rotated.',
  });

const invalidSession = () =>
  new AppError(401, 'INVALID_SESSION', 'The session is not valid or has expired', {
    suggestion: 'Sign in again with POST /auth/login.',
  });

const accessDenied = () =>
  new AppError(403, 'PROJECT_ACCESS_DENIED', 'You are not a member of this project', {
    suggestion: 'Ask an owner or admin of the project to add you, or pick one of your projects (GET /users/@me/projects).',
  });

/**
 * Who may call a route: a project key (Bearer sk_/pk_), or a signed-in member of the project.
 * A disabled project still answers reads, so its owners can see why; writes get 403 PROJECT_DISABLED.
 */
export function authenticate(sessionSecret: string, keys: ApiKeys) {
  return (route: GuardedRoute): RequestHandler =>
    async (req, res, next) => {
      try {
        const scope = scopeOf(res);
        const header = req.get('authorization');
        if (header && header.trim() !== '' && route.auth !== 'session') {
          scope.auth = await byKey(keys, header, route, req);
        } else {
          const session = await readSession(req, scope.em, sessionSecret);
          if ('error' in session) throw session.error === 'missing' ? missing(route.auth !== 'session') : invalidSession();
          scope.user = session.user;
          const projectId = route.projectParam ? String(req.params[route.projectParam]) : req.get('x-project-id');
          if (route.auth !== 'session' && !projectId) {
            throw new AppError(400, 'BAD_REQUEST', 'The X-Project-Id header is required when signed in', {
              suggestion: 'Send the id of one of your projects (GET /users/@me/projects) in X-Project-Id.',
            });
          }
          if (projectId) scope.auth = await byMembership(scope, projectId, route);
        }
        if (scope.auth) refuseWritesWhenDisabled(scope.auth.project, route);
        next();
      } catch (err) {
        next(err);
      }
    };
}

async function byKey(keys: ApiKeys, header: string, route: GuardedRoute, req: Request): Promise<AuthContext> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw invalid('The Authorization header must be "Bearer <key>"');
  const found = await keys.find(match[1]!);
  if (!found) throw invalid();
  if (found.kind === 'public' && route.auth !== 'publicOrSecret') {
    throw invalid('A public key (pk_…) can only be used on POST /v1/track; use the secret key (sk_…)');
  }
  if (route.projectParam && String(req.params[route.projectParam]) !== found.project.id) throw accessDenied();
  if (route.role === 'OWNER') {
    throw new AppError(403, 'FORBIDDEN', "Only the project's owner can do this, signed in", {
      suggestion: 'Sign in as the owner of the project; API keys cannot do this.',
    });
  }
  return { project: found.project, via: found.kind };
}

async function byMembership(scope: RequestScope, projectId: string, route: GuardedRoute): Promise<AuthContext> {
  const role = await memberRole(scope.em, projectId, scope.user!.id);
  if (!role) throw accessDenied();
  if (route.role && !roleAtLeast(role, route.role)) {
    throw new AppError(403, 'FORBIDDEN', `This needs the ${route.role} role in the project; you are ${role}`, {
      suggestion: 'Ask an owner or admin of the project.',
    });
  }
  const project = await scope.em.findOneOrFail(ProjectSchema, { id: projectId });
  return { project, via: 'session', role };
}

/** Who acts on a project: a session with its member role, or a secret key, which has no user and counts as ADMIN. */
export function actorOf(auth: AuthContext, user: SessionUser | undefined): Actor {
  return auth.via === 'session' ? { userId: user!.id, role: auth.role! } : { role: 'ADMIN' };
}

function refuseWritesWhenDisabled(project: Project, route: GuardedRoute): void {
  if (project.disabled && route.method !== 'get') {
    throw new AppError(403, 'PROJECT_DISABLED', 'This project is disabled', {
      suggestion: 'Reads still work; see GET /projects/:id/security for why, and ask the operator to re-enable it.',
    });
  }
}

export function requestScope(orm: Orm): RequestHandler {
  return (_req, res, next) => {
    // Forked on first use: a fork was 3.3 % of the service's CPU samples under /v1/track load,
    // and a track without an Idempotency-Key never needs one (its statement is shared).
    let em: EntityManager | undefined;
    const scope: Omit<RequestScope, 'em'> & { readonly em: EntityManager } = {
      get em() {
        return (em ??= orm.em.fork());
      },
    };
    res.locals.scope = scope;
    next();
  };
}
