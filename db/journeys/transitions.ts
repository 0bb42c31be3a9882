import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, type FieldError, notFound, validationError } from '../../errors';
import { newId } from '../ids';
import { query, queryOne } from '../sql';
import { type TransitionDto, toTransition } from './journeys';
import { lockJourney, type StepRow, type TransitionRow } from './rows';
import { allowedBranches, type Branch, type StepType } from './steps';
import { touchAndRevalidate } from './stored-graph';

/** Adding and deleting the transitions between a journey's steps, one per branch of a step. */

const transitionNotFound = () => notFound('workflow transition');

/** 422 about one field, in the validation envelope. */
const invalid = (field: string, message: string, code: string) => validationError([{ field, message, code }]);

export async function addTransition(
  em: EntityManager,
  projectId: string,
  journeyId: string,
  input: { fromStepId: string; toStepId: string; branch?: Branch | null },
): Promise<TransitionDto> {
  return em.transactional(async (tx) => {
    await lockJourney(tx, projectId, journeyId);
    const branch = input.branch ?? null;
    const steps = await query<StepRow>(tx, 'select id, type, name, config from workflow_steps where workflow_id = ? and id = any(?::text[])', [
      journeyId,
      [input.fromStepId, input.toStepId],
    ]);
    const from = steps.find((s) => s.id === input.fromStepId);
    const to = steps.find((s) => s.id === input.toStepId);
    const missing: FieldError[] = [];
    if (!from) missing.push({ field: 'fromStepId', message: `No step ${input.fromStepId} in workflow ${journeyId}`, code: 'step_not_found' });
    if (!to) missing.push({ field: 'toStepId', message: `No step ${input.toStepId} in workflow ${journeyId}`, code: 'step_not_found' });
    if (missing.length > 0) throw validationError(missing);

    if (from!.type === 'EXIT') {
      throw invalid('fromStepId', 'An EXIT step ends the execution; it cannot have outgoing transitions', 'invalid_transition');
    }
    if (to!.type === 'TRIGGER') {
      throw invalid('toStepId', 'The TRIGGER step is the entry of the workflow; no transition may lead to it', 'invalid_transition');
    }
    if (!allowedBranches(from!.type).includes(branch)) {
      throw invalid('branch', branchRule(from!.type), 'invalid_branch');
    }
    if (from!.type === 'WAIT_FOR_EVENT' && branch === 'timeout' && from!.config.timeout === undefined) {
      throw invalid('branch', `Step ${from!.id} waits without a timeout, so a "timeout" branch could never be taken; set its config.timeout first`, 'invalid_branch');
    }

    const existing = await query<TransitionRow>(
      tx,
      'select id, from_step_id, to_step_id, branch from workflow_transitions where from_step_id = ? order by id',
      [from!.id],
    );
    const label = (b: Branch | null) => (b === null ? 'an unlabelled' : `${b === 'event' ? 'an' : 'a'} "${b}"`);
    const same = existing.find((t) => t.branch === branch);
    if (same) {
      throw conflict(
        `Step ${from!.id} already has ${label(branch)} transition (${same.id}, to ${same.to_step_id}); one transition per branch`,
        `Delete transition ${same.id} first (DELETE /workflows/${journeyId}/transitions/${same.id}), then add the new one.`,
      );
    }
    if (from!.type === 'WAIT_FOR_EVENT') {
      // An unlabelled transition is taken on the event and on the timeout alike.
      const clash = existing.find((t) => (branch === null) !== (t.branch === null));
      if (clash) {
        throw conflict(
          branch === null
            ? `Step ${from!.id} already has ${label(clash.branch)} transition (${clash.id}); an unlabelled one would be taken on the same outcome`
            : `Step ${from!.id} already has an unlabelled transition (${clash.id}), taken on both the event and the timeout`,
          `Delete transition ${clash.id} first, or use only "event"/"timeout" branches (or a single unlabelled transition).`,
        );
      }
    }
    const row = await queryOne<TransitionRow>(
      tx,
      `insert into workflow_transitions (id, workflow_id, from_step_id, to_step_id, branch) values (?, ?, ?, ?, ?)
       returning id, from_step_id, to_step_id, branch`,
      [newId('trn'), journeyId, from!.id, to!.id, branch],
    );
    await touchAndRevalidate(tx, journeyId);
    return toTransition(row!);
  });
}

function branchRule(type: StepType): string {
  if (type === 'CONDITION') return 'A transition from a CONDITION step needs branch "yes" or "no"';
  if (type === 'WAIT_FOR_EVENT') return 'A transition from a WAIT_FOR_EVENT step has branch "event", "timeout", or none (taken on both)';
  return `A transition from a ${type} step carries no branch`;
}

export async function deleteTransition(em: EntityManager, projectId: string, journeyId: string, transitionId: string): Promise<void> {
  await em.transactional(async (tx) => {
    await lockJourney(tx, projectId, journeyId);
    const rows = await query(tx, 'delete from workflow_transitions where workflow_id = ? and id = ? returning id', [journeyId, transitionId]);
    if (rows.length === 0) throw transitionNotFound();
    await touchAndRevalidate(tx, journeyId);
  });
}
