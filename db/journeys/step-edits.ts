import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, notFound, validationError } from '../../errors';
import { newId } from '../ids';
import { query, queryOne } from '../sql';
import { type StepDto, type TransitionDto, toStep, toTransition } from './journeys';
import { journeyNotFound, lockJourney, type StepRow, type TransitionRow } from './rows';
import type { StepConfigs, StepType, UserStepType } from './steps';
import { touchAndRevalidate } from './stored-graph';

/** Adding, editing and deleting the steps of a journey definition (the step configs are in steps.ts). */

const stepNotFound = () => notFound('workflow step');

export async function getStep(em: EntityManager, projectId: string, journeyId: string, stepId: string): Promise<StepDto> {
  const row = await queryOne<StepRow>(
    em,
    `select s.id, s.type, s.name, s.config from workflow_steps s join workflows w on w.id = s.workflow_id
     where w.project_id = ? and w.id = ? and s.id = ?`,
    [projectId, journeyId, stepId],
  );
  if (!row) {
    await requireJourney(em, projectId, journeyId);
    throw stepNotFound();
  }
  return toStep(row);
}

/** `config` must already be parsed with stepConfigSchemas[type]; the template is checked here. */
export type AddStepInput = { [K in UserStepType]: { type: K; name?: string | null; config: StepConfigs[K] } }[UserStepType];

export async function addStep(em: EntityManager, projectId: string, journeyId: string, input: AddStepInput): Promise<StepDto> {
  return em.transactional(async (tx) => {
    await lockJourney(tx, projectId, journeyId);
    await checkStepReferences(tx, projectId, input.type, input.config);
    const row = await queryOne<StepRow>(
      tx,
      'insert into workflow_steps (id, workflow_id, type, name, config) values (?, ?, ?, ?, ?::jsonb) returning id, type, name, config',
      [newId('stp'), journeyId, input.type, input.name ?? null, JSON.stringify(input.config)],
    );
    await touchAndRevalidate(tx, journeyId);
    return toStep(row!);
  });
}

/**
 * Renames a step and/or replaces its config. The caller parsed `config` for the step's type
 * (a type never changes); the TRIGGER's config is the journey's eventName and is refused here.
 */
export async function updateStep(
  em: EntityManager,
  projectId: string,
  journeyId: string,
  stepId: string,
  patch: { name?: string | null; config?: Record<string, unknown> },
): Promise<StepDto> {
  return em.transactional(async (tx) => {
    await lockJourney(tx, projectId, journeyId);
    const step = await queryOne<StepRow>(tx, 'select id, type, name, config from workflow_steps where workflow_id = ? and id = ?', [
      journeyId,
      stepId,
    ]);
    if (!step) throw stepNotFound();
    if (patch.config !== undefined) {
      if (step.type === 'TRIGGER') throw triggerConfigRefused(journeyId);
      await checkStepReferences(tx, projectId, step.type, patch.config);
    }
    const row = await queryOne<StepRow>(
      tx,
      `update workflow_steps set name = case when ?::boolean then ? else name end, config = coalesce(?::jsonb, config)
       where id = ? returning id, type, name, config`,
      [patch.name !== undefined, patch.name ?? null, patch.config === undefined ? null : JSON.stringify(patch.config), stepId],
    );
    await touchAndRevalidate(tx, journeyId);
    return toStep(row!);
  });
}

export const triggerConfigRefused = (journeyId: string) =>
  new AppError(422, 'VALIDATION_ERROR', "The TRIGGER step's config is the workflow's trigger event and cannot be edited here", {
    errors: [{ field: 'config', message: `Change the event with PATCH /workflows/${journeyId} {"eventName": "..."}`, code: 'trigger_config' }],
    suggestion: `Send PATCH /workflows/${journeyId} with {"eventName": "<event>"}; the TRIGGER step follows it. Its name can be changed here.`,
  });

export interface DeletedStep {
  id: string;
  deleted: true;
  /** Transitions that led to the deleted step and now lead to its successor (splice). */
  reconnected: TransitionDto[];
  /** Transitions removed with the step. */
  removedTransitionIds: string[];
}

/**
 * Deletes a step and its transitions. With `splice`, every transition that led to the step is
 * redirected to the step's successor first; a step with more than one outgoing transition has
 * no single successor and is refused (422), as is the TRIGGER step.
 */
export async function deleteStep(
  em: EntityManager,
  projectId: string,
  journeyId: string,
  stepId: string,
  opts: { splice: boolean },
): Promise<DeletedStep> {
  return em.transactional(async (tx) => {
    await lockJourney(tx, projectId, journeyId);
    const step = await queryOne<StepRow>(tx, 'select id, type, name, config from workflow_steps where workflow_id = ? and id = ?', [
      journeyId,
      stepId,
    ]);
    if (!step) throw stepNotFound();
    if (step.type === 'TRIGGER') {
      throw new AppError(422, 'VALIDATION_ERROR', 'The TRIGGER step is the entry of the workflow and cannot be deleted', {
        errors: [{ field: 'params.stepId', message: 'The TRIGGER step cannot be deleted', code: 'trigger_step' }],
        suggestion: 'Delete the workflow instead, or change its event with PATCH /workflows/:id {"eventName": "..."}.',
      });
    }
    const transitions = await query<TransitionRow>(
      tx,
      'select id, from_step_id, to_step_id, branch from workflow_transitions where from_step_id = ? or to_step_id = ? order by id',
      [stepId, stepId],
    );
    // A transition from the step to itself goes with it and is neither a successor nor a source.
    const outgoing = transitions.filter((t) => t.from_step_id === stepId && t.to_step_id !== stepId);
    const incoming = transitions.filter((t) => t.to_step_id === stepId && t.from_step_id !== stepId);
    let reconnected: TransitionRow[] = [];
    if (opts.splice) {
      if (outgoing.length > 1) {
        const branches = outgoing.map((t) => `${t.branch ?? 'unlabelled'} → ${t.to_step_id}`).join(', ');
        throw new AppError(
          422,
          'VALIDATION_ERROR',
          `Step ${stepId} (${step.type}) has ${outgoing.length} outgoing transitions (${branches}); splice needs a single successor to reconnect to`,
          {
            errors: [{ field: 'query.splice', message: `The step has ${outgoing.length} outgoing branches (${branches}); there is no single successor`, code: 'cannot_splice' }],
            suggestion: 'Delete the transitions of the branches you do not keep first, or delete the step without splice and reconnect its neighbours yourself.',
          },
        );
      }
      const successor = outgoing[0]?.to_step_id;
      if (successor !== undefined && incoming.length > 0) {
        // Each source keeps its transition (id and branch); only the target changes, so the
        // one-transition-per-branch rule cannot be broken by this.
        reconnected = await query<TransitionRow>(
          tx,
          'update workflow_transitions set to_step_id = ? where id = any(?::text[]) returning id, from_step_id, to_step_id, branch',
          [successor, incoming.map((t) => t.id)],
        );
        reconnected.sort((a, b) => (a.id < b.id ? -1 : 1));
      }
    }
    const kept = new Set(reconnected.map((t) => t.id));
    await query(tx, 'delete from workflow_steps where id = ?', [stepId]);
    await touchAndRevalidate(tx, journeyId);
    return {
      id: stepId,
      deleted: true as const,
      reconnected: reconnected.map(toTransition),
      removedTransitionIds: transitions.filter((t) => !kept.has(t.id)).map((t) => t.id),
    };
  });
}

/** A SEND_EMAIL step's template must be one of the project's. */
async function checkStepReferences(em: EntityManager, projectId: string, type: StepType, config: Record<string, unknown>): Promise<void> {
  if (type !== 'SEND_EMAIL') return;
  const templateId = String(config.templateId);
  const found = await queryOne(em, 'select 1 from templates where project_id = ? and id = ?', [projectId, templateId]);
  if (!found) {
    throw validationError([{ field: 'config.templateId', message: `No template ${templateId} in this project`, code: 'template_not_found' }]);
  }
}

async function requireJourney(em: EntityManager, projectId: string, id: string): Promise<void> {
  const row = await queryOne(em, 'select id from workflows where project_id = ? and id = ?', [projectId, id]);
  if (!row) throw journeyNotFound();
}
