import type { RequestHandler } from 'express';
import type { Orm } from '../../db/orm';
import { findProjectByKey } from '../../db/projects';
import { AppError } from '../../errors';
import type { AuthMode } from '../routing';
import { scopeOf } from '../routing';

const missing = () =>
  new AppError(401, 'MISSING_AUTH', 'No API key was provided', {
    suggestion: 'Send your key in the header Authorization: Bearer <key>.',
  });

const invalid = (message = 'The API key is not valid') =>
  new AppError(401, 'INVALID_API_KEY', message, {
    suggestion: 'Use a current secret key (sk_…) of your project; keys stop working when rotated.',
  });

/** Derives the project from a Bearer key; public keys pass only where the route allows them. */
export function authenticate(orm: Orm) {
  return (mode: Exclude<AuthMode, 'none'>): RequestHandler =>
    async (req, res, next) => {
      try {
        const header = req.get('authorization');
        if (!header || header.trim() === '') throw missing();
        const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
        if (!match) throw invalid('The Authorization header must be "Bearer <key>"');
        const found = await findProjectByKey(scopeOf(res).em, match[1]!);
        if (!found) throw invalid();
        if (found.kind === 'public' && mode !== 'publicOrSecret') {
          throw invalid('A public key (pk_…) can only be used on POST /v1/track; use the secret key (sk_…)');
        }
        // The column existed but nothing looked at it: a disabled project's keys kept working.
        // Contract: 403 PROJECT_DISABLED (spec "Errors": 403 … or project disabled).
        if (found.project.disabled) {
          throw new AppError(403, 'PROJECT_DISABLED', 'This project is disabled', {
            suggestion: 'Ask an owner of the project to re-enable it.',
          });
        }
        scopeOf(res).auth = { project: found.project, keyKind: found.kind };
        next();
      } catch (err) {
        next(err);
      }
    };
}

export function requestScope(orm: Orm): RequestHandler {
  return (_req, res, next) => {
    res.locals.scope = { em: orm.em.fork() };
    next();
  };
}
