import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict } from '../../errors';
import { newId } from '../ids';
import { type CursorPage, projectRowsPage } from '../paging';
import { query, queryOne } from '../sql';
import { JOURNEY_COLUMNS, type JourneyRow, journeyNotFound, lockJourney, readJourney, type StepRow, type TransitionRow } from './rows';
import type { Branch, StepType } from './steps';
import { assertValidGraph } from './stored-graph';

/**
 * Journey definitions: the journey row, its steps and transitions. The API and the tables call
 * journeys workflows (`/workflows`, table `workflows`; docs/journeys.md);
 * in code "workflow" is left to Temporal. Executions live in db/journeys/executions.ts; they run a
 * snapshot taken with loadGraph (stored-graph.ts). Steps are edited in step-edits.ts, transitions
 * in transitions.ts.
 *
 * Every change to a definition runs in one transaction that first locks the journey row, so
 * concurrent edits of one journey are serialized and an enabled journey's graph is validated
 * against exactly the state the change produced (and rolled back when it is no longer valid).
 */

export interface JourneyDto {
  id: string;
  name: string;
  description: string | null;
  triggerType: 'EVENT';
  triggerConfig: { eventName: string };
  enabled: boolean;
  allowReentry: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface StepDto {
  id: string;
  type: StepType;
  name: string | null;
  config: Record<string, unknown>;
}

export interface TransitionDto {
  id: string;
  fromStepId: string;
  toStepId: string;
  branch: Branch | null;
}

export interface JourneyDetailDto extends JourneyDto {
  steps: StepDto[];
  transitions: TransitionDto[];
}

export interface NewJourney {
  name: string;
  description?: string | null;
  eventName: string;
  allowReentry?: boolean;
}

export interface JourneyPatch {
  name?: string;
  description?: string | null;
  eventName?: string;
  enabled?: boolean;
  allowReentry?: boolean;
}

const ACTIVE_STATUSES = ['RUNNING', 'WAITING'];

const toDto = (r: JourneyRow): JourneyDto => ({
  id: r.id,
  name: r.name,
  description: r.description,
  triggerType: r.trigger_type,
  triggerConfig: { eventName: r.trigger_config.eventName },
  enabled: r.enabled,
  allowReentry: r.allow_reentry,
  createdAt: new Date(r.created_at).toISOString(),
  updatedAt: new Date(r.updated_at).toISOString(),
});

export const toStep = (r: StepRow): StepDto => ({ id: r.id, type: r.type, name: r.name, config: r.config });

export const toTransition = (r: TransitionRow): TransitionDto => ({
  id: r.id,
  fromStepId: r.from_step_id,
  toStepId: r.to_step_id,
  branch: r.branch,
});

export async function listJourneys(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string },
): Promise<CursorPage<JourneyDto>> {
  const page = await projectRowsPage<JourneyRow>(em, 'workflows', JOURNEY_COLUMNS, projectId, opts);
  return { ...page, data: page.data.map(toDto) };
}

/** Always `triggerType: EVENT`, `enabled: false`, with its TRIGGER entry step. */
export async function createJourney(em: EntityManager, projectId: string, input: NewJourney): Promise<JourneyDetailDto> {
  return em.transactional(async (tx) => {
    const id = newId('wfl');
    await query(
      tx,
      `insert into workflows (id, project_id, name, description, trigger_type, trigger_config, enabled, allow_reentry)
       values (?, ?, ?, ?, 'EVENT', ?::jsonb, false, ?)`,
      [id, projectId, input.name, input.description ?? null, JSON.stringify({ eventName: input.eventName }), input.allowReentry ?? false],
    );
    await query(tx, `insert into workflow_steps (id, workflow_id, type, name, config) values (?, ?, 'TRIGGER', null, ?::jsonb)`, [
      newId('stp'),
      id,
      JSON.stringify({ eventName: input.eventName }),
    ]);
    return getJourney(tx, projectId, id);
  });
}

export async function getJourney(em: EntityManager, projectId: string, id: string): Promise<JourneyDetailDto> {
  const row = await readJourney(em, id, projectId);
  if (!row) throw journeyNotFound();
  return { ...toDto(row), steps: row.steps.map(toStep), transitions: row.transitions.map(toTransition) };
}

export async function updateJourney(em: EntityManager, projectId: string, id: string, patch: JourneyPatch): Promise<JourneyDetailDto> {
  return em.transactional(async (tx) => {
    await lockJourney(tx, projectId, id);
    const sets: string[] = [];
    const params: unknown[] = [];
    const set = (column: string, value: unknown, cast = '') => {
      sets.push(`${column} = ?${cast}`);
      params.push(value);
    };
    if (patch.name !== undefined) set('name', patch.name);
    if (patch.description !== undefined) set('description', patch.description);
    if (patch.eventName !== undefined) set('trigger_config', JSON.stringify({ eventName: patch.eventName }), '::jsonb');
    if (patch.enabled !== undefined) set('enabled', patch.enabled);
    if (patch.allowReentry !== undefined) set('allow_reentry', patch.allowReentry);
    await query(tx, `update workflows set ${[...sets, 'updated_at = now()'].join(', ')} where id = ?`, [...params, id]);
    if (patch.eventName !== undefined) {
      // The TRIGGER step mirrors the trigger config, so a graph read from the steps alone agrees.
      await query(tx, `update workflow_steps set config = ?::jsonb where workflow_id = ? and type = 'TRIGGER'`, [
        JSON.stringify({ eventName: patch.eventName }),
        id,
      ]);
    }
    if (patch.enabled === true) {
      await assertValidGraph(
        tx,
        id,
        (n) => `The workflow cannot be enabled: its graph has ${n} problem${n === 1 ? '' : 's'}`,
        'Fix the steps and transitions listed in error.errors, then enable the workflow again.',
      );
    }
    return getJourney(tx, projectId, id);
  });
}

/** Refused with 409 while executions are RUNNING or WAITING; finished ones go with it. */
export async function deleteJourney(em: EntityManager, projectId: string, id: string): Promise<void> {
  await em.transactional(async (tx) => {
    // The row lock also makes an execution being started concurrently either visible here or
    // failing on its foreign key once this commits.
    await lockJourney(tx, projectId, id);
    const active = await queryOne<{ n: string }>(
      tx,
      'select count(*) as n from workflow_executions where workflow_id = ? and status = any(?::text[])',
      [id, ACTIVE_STATUSES],
    );
    const n = Number(active!.n);
    if (n > 0) {
      throw conflict(
        `The workflow has ${n} active execution${n === 1 ? '' : 's'} (RUNNING or WAITING) and cannot be deleted`,
        `Cancel them first with POST /workflows/${id}/executions/cancel-all (or wait for them to finish), then delete the workflow.`,
      );
    }
    await query(tx, 'delete from workflows where id = ?', [id]);
  });
}
