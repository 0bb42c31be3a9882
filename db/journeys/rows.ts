import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { queryOne } from '../sql';
import type { Branch, StepType } from './steps';

/** The definition tables' rows, and the reads and locks every module of this folder starts with. */

export interface JourneyRow {
  id: string;
  name: string;
  description: string | null;
  trigger_type: 'EVENT';
  trigger_config: { eventName: string };
  enabled: boolean;
  allow_reentry: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface StepRow {
  id: string;
  type: StepType;
  name: string | null;
  config: Record<string, unknown>;
}

export interface TransitionRow {
  id: string;
  from_step_id: string;
  to_step_id: string;
  branch: Branch | null;
}

export const JOURNEY_COLUMNS = 'id, name, description, trigger_type, trigger_config, enabled, allow_reentry, created_at, updated_at';

export const journeyNotFound = () => notFound('workflow');

/**
 * The journey row with its steps and transitions, in one statement: one snapshot, so a
 * concurrent edit is seen entirely or not at all, without a transaction of its own.
 */
export async function readJourney(
  em: EntityManager,
  id: string,
  projectId?: string,
): Promise<(JourneyRow & { steps: StepRow[]; transitions: TransitionRow[] }) | undefined> {
  return queryOne(
    em,
    `select ${JOURNEY_COLUMNS},
       (select coalesce(json_agg(json_build_object('id', s.id, 'type', s.type, 'name', s.name, 'config', s.config) order by s.id), '[]'::json)
        from workflow_steps s where s.workflow_id = w.id) as steps,
       (select coalesce(json_agg(json_build_object('id', t.id, 'from_step_id', t.from_step_id, 'to_step_id', t.to_step_id, 'branch', t.branch) order by t.id), '[]'::json)
        from workflow_transitions t where t.workflow_id = w.id) as transitions
     from workflows w where w.id = ?${projectId === undefined ? '' : ' and w.project_id = ?'}`,
    projectId === undefined ? [id] : [id, projectId],
  );
}

export async function lockJourney(em: EntityManager, projectId: string, id: string): Promise<void> {
  const row = await queryOne(em, 'select id from workflows where project_id = ? and id = ? for update', [projectId, id]);
  if (!row) throw journeyNotFound();
}
