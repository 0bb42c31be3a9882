import type { Orm } from '../../db/orm';
import { createContactFieldActivities } from './contact-fields';

export interface ActivityDeps {
  orm: Orm;
}

/** Activities are built from their dependencies, so tests and the worker wire them the same way. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createContactFieldActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
