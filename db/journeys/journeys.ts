import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, type FieldError, notFound, validationError } from '../../errors';
import type { FieldType } from '../entities/contact-field';
import { newId } from '../ids';
import { type CursorPage, projectRowsPage } from '../paging';
import { query, queryOne } from '../sql';
import { type GraphIssue, type ValidatableGraph, validateJourneyGraph } from './graph';
import { allowedBranches, type Branch, type GraphStep, type JourneyGraph, type StepConfigs, type StepType, type UserStepType } from './steps';

/**
 * Journey definitions: the journey row, its steps and transitions. The API, the spec and the
 * tables call journeys workflows (contract-decisions "Workflows", `/workflows`, table `workflows`);
 * in code "workflow" is left to Temporal. Executions live in db/journeys/executions.ts; they run a
 * snapshot taken with loadGraph.
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

interface JourneyRow {
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

interface StepRow {
  id: string;
  type: StepType;
  name: string | null;
  config: Record<string, unknown>;
}

interface TransitionRow {
  id: string;
  from_step_id: string;
  to_step_id: string;
  branch: Branch | null;
}

const COLUMNS = 'id, name, description, trigger_type, trigger_config, enabled, allow_reentry, created_at, updated_at';
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

const toStep = (r: StepRow): StepDto => ({ id: r.id, type: r.type, name: r.name, config: r.config });

const toTransition = (r: TransitionRow): TransitionDto => ({
  id: r.id,
  fromStepId: r.from_step_id,
  toStepId: r.to_step_id,
  branch: r.branch,
});

const journeyNotFound = () => notFound('workflow');
const stepNotFound = () => notFound('workflow step');
const transitionNotFound = () => notFound('workflow transition');

/** 422 about one field, in the validation envelope. */
const invalid = (field: string, message: string, code: string) => validationError([{ field, message, code }]);

// ---------------------------------------------------------------------------------------------
// Journeys

export async function listJourneys(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string },
): Promise<CursorPage<JourneyDto>> {
  const page = await projectRowsPage<JourneyRow>(em, 'workflows', COLUMNS, projectId, opts);
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

// ---------------------------------------------------------------------------------------------
// Steps

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
  if (!found) throw invalid('config.templateId', `No template ${templateId} in this project`, 'template_not_found');
}

// ---------------------------------------------------------------------------------------------
// Transitions

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

// ---------------------------------------------------------------------------------------------
// Graph

/**
 * The graph an execution runs, read in one consistent snapshot: the engine calls this when an
 * execution starts and keeps the result, so later edits never reach executions in flight.
 * The TRIGGER step's config is the journey's trigger config.
 */
export async function loadGraph(em: EntityManager, journeyId: string): Promise<JourneyGraph> {
  const g = await loadValidatableGraph(em, journeyId);
  return {
    entryStepId: g.entryStepId,
    steps: Object.fromEntries(Object.entries(g.steps).map(([id, s]) => [id, { id: s.id, type: s.type, config: s.config } as GraphStep])),
    transitions: g.transitions.map((t) => ({ from: t.from, to: t.to, branch: t.branch })),
  };
}

/** loadGraph plus transition ids and step names, so validation messages point at real rows. */
async function loadValidatableGraph(em: EntityManager, journeyId: string): Promise<ValidatableGraph> {
  const row = await readJourney(em, journeyId);
  if (!row) throw journeyNotFound();
  const steps: ValidatableGraph['steps'] = {};
  let entryStepId = '';
  for (const s of row.steps) {
    if (s.type === 'TRIGGER') {
      entryStepId ||= s.id;
      steps[s.id] = { id: s.id, type: 'TRIGGER', config: { eventName: row.trigger_config.eventName }, name: s.name };
    } else {
      steps[s.id] = { id: s.id, type: s.type, config: s.config, name: s.name } as ValidatableGraph['steps'][string];
    }
  }
  return {
    entryStepId,
    steps,
    transitions: row.transitions.map((t) => ({ id: t.id, from: t.from_step_id, to: t.to_step_id, branch: t.branch })),
  };
}

/**
 * The journey row with its steps and transitions, in one statement: one snapshot, so a
 * concurrent edit is seen entirely or not at all, without a transaction of its own.
 */
async function readJourney(
  em: EntityManager,
  id: string,
  projectId?: string,
): Promise<(JourneyRow & { steps: StepRow[]; transitions: TransitionRow[] }) | undefined> {
  return queryOne(
    em,
    `select ${COLUMNS},
       (select coalesce(json_agg(json_build_object('id', s.id, 'type', s.type, 'name', s.name, 'config', s.config) order by s.id), '[]'::json)
        from workflow_steps s where s.workflow_id = w.id) as steps,
       (select coalesce(json_agg(json_build_object('id', t.id, 'from_step_id', t.from_step_id, 'to_step_id', t.to_step_id, 'branch', t.branch) order by t.id), '[]'::json)
        from workflow_transitions t where t.workflow_id = w.id) as transitions
     from workflows w where w.id = ?${projectId === undefined ? '' : ' and w.project_id = ?'}`,
    projectId === undefined ? [id] : [id, projectId],
  );
}

/** The graph problems as validation errors: `errors[].field` is the step, transition or `graph`. */
export const graphErrors = (issues: GraphIssue[]): FieldError[] =>
  issues.map((i) => ({ field: i.path, message: i.message, code: 'invalid_graph' }));

async function assertValidGraph(em: EntityManager, journeyId: string, headline: (n: number) => string, suggestion: string): Promise<void> {
  const graph = await loadValidatableGraph(em, journeyId);
  const issues = [...validateJourneyGraph(graph), ...(await missingTemplates(em, journeyId, graph))];
  if (issues.length === 0) return;
  const message = `${headline(issues.length)}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`;
  throw new AppError(422, 'VALIDATION_ERROR', message.length > 2000 ? `${message.slice(0, 1997)}...` : message, {
    errors: graphErrors(issues),
    suggestion,
  });
}

/**
 * SEND_EMAIL steps whose template was deleted after the step was saved: the graph is sound,
 * but every execution reaching the step would fail, so an enabled journey may not have one.
 */
async function missingTemplates(em: EntityManager, journeyId: string, graph: ValidatableGraph): Promise<GraphIssue[]> {
  const sends = Object.values(graph.steps).filter((s) => s.type === 'SEND_EMAIL');
  if (sends.length === 0) return [];
  const found = await query<{ id: string }>(
    em,
    'select t.id from templates t join workflows w on w.project_id = t.project_id where w.id = ? and t.id = any(?::text[])',
    [journeyId, sends.map((s) => s.config.templateId)],
  );
  const present = new Set(found.map((t) => t.id));
  return sends
    .filter((s) => !present.has(s.config.templateId))
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map((s) => ({
      path: `steps.${s.id}`,
      message: `SEND_EMAIL step ${s.name ? `"${s.name}" (${s.id})` : s.id} uses template ${s.config.templateId}, which no longer exists; choose another template`,
    }));
}

/** After a change to the definition: bump updated_at, and keep an enabled journey valid. */
async function touchAndRevalidate(em: EntityManager, journeyId: string): Promise<void> {
  const row = await queryOne<{ enabled: boolean }>(em, 'update workflows set updated_at = now() where id = ? returning enabled', [journeyId]);
  if (!row!.enabled) return;
  await assertValidGraph(
    em,
    journeyId,
    (n) => `This change would leave the enabled workflow with ${n} graph problem${n === 1 ? '' : 's'}, so it was not made`,
    'Make the change so the graph stays valid, or disable the workflow (PATCH {"enabled": false}), edit it, and enable it again.',
  );
}

async function lockJourney(em: EntityManager, projectId: string, id: string): Promise<void> {
  const row = await queryOne(em, 'select id from workflows where project_id = ? and id = ? for update', [projectId, id]);
  if (!row) throw journeyNotFound();
}

async function requireJourney(em: EntityManager, projectId: string, id: string): Promise<void> {
  const row = await queryOne(em, 'select id from workflows where project_id = ? and id = ?', [projectId, id]);
  if (!row) throw journeyNotFound();
}

// ---------------------------------------------------------------------------------------------
// Fields and usage

export type JourneyFieldType = FieldType | 'event';

/** A field a CONDITION step can test, as the journey editor lists it. */
export interface JourneyField {
  field: string;
  type: JourneyFieldType;
  source: 'contact' | 'data' | 'event';
}

/**
 * What a CONDITION step can test: the contact's email and subscription, its custom fields with
 * their registered type, and the event names seen in the project (type `event`: for the
 * triggered / notTriggered / triggeredWithin / triggeredOlderThan operators).
 */
export async function journeyFields(em: EntityManager, projectId: string): Promise<JourneyField[]> {
  const [data, events] = await Promise.all([
    query<{ key: string; type: FieldType }>(em, 'select key, type from contact_fields where project_id = ? order by key', [projectId]),
    // Distinct names by skipping through the (project_id, name, id) index: one probe per name,
    // not a scan of every event.
    query<{ name: string }>(
      em,
      `with recursive names(name) as (
         (select name from events where project_id = ? order by name limit 1)
         union all
         select (select e.name from events e where e.project_id = ? and e.name > n.name order by e.name limit 1)
         from names n where n.name is not null
       ) select name from names where name is not null`,
      [projectId, projectId],
    ),
  ]);
  return [
    { field: 'contact.email', type: 'string', source: 'contact' },
    { field: 'contact.subscribed', type: 'boolean', source: 'contact' },
    ...data.map((d) => ({ field: `data.${d.key}`, type: d.type, source: 'data' as const })),
    ...events.map((e) => ({ field: `event.${e.name}`, type: 'event' as const, source: 'event' as const })),
  ];
}

export interface EventJourneyUsage {
  workflowTriggers: { workflowId: string; workflowName: string; enabled: boolean }[];
  waitForEventSteps: { workflowId: string; workflowName: string; stepId: string; stepName: string | null }[];
  conditionSteps: { workflowId: string; workflowName: string; stepId: string; stepName: string | null; field: string; operator: string }[];
}

/** Journeys that start on the event, wait for it, or test it in a CONDITION (`event.<name>`). */
export async function journeysUsingEvent(em: EntityManager, projectId: string, eventName: string): Promise<EventJourneyUsage> {
  const [triggers, steps] = await Promise.all([
    query<{ id: string; name: string; enabled: boolean }>(
      em,
      `select id, name, enabled from workflows where project_id = ? and trigger_config->>'eventName' = ? order by id`,
      [projectId, eventName],
    ),
    query<{ workflow_id: string; workflow_name: string; id: string; name: string | null; type: StepType; field: string | null; operator: string | null }>(
      em,
      `select s.workflow_id, w.name as workflow_name, s.id, s.name, s.type, s.config->>'field' as field, s.config->>'operator' as operator
       from workflow_steps s join workflows w on w.id = s.workflow_id
       where w.project_id = ?
         and ((s.type = 'WAIT_FOR_EVENT' and s.config->>'eventName' = ?) or (s.type = 'CONDITION' and s.config->>'field' = ?))
       order by s.workflow_id, s.id`,
      [projectId, eventName, `event.${eventName}`],
    ),
  ]);
  return {
    workflowTriggers: triggers.map((t) => ({ workflowId: t.id, workflowName: t.name, enabled: t.enabled })),
    waitForEventSteps: steps
      .filter((s) => s.type === 'WAIT_FOR_EVENT')
      .map((s) => ({ workflowId: s.workflow_id, workflowName: s.workflow_name, stepId: s.id, stepName: s.name })),
    conditionSteps: steps
      .filter((s) => s.type === 'CONDITION')
      .map((s) => ({
        workflowId: s.workflow_id,
        workflowName: s.workflow_name,
        stepId: s.id,
        stepName: s.name,
        field: s.field!,
        operator: s.operator!,
      })),
  };
}
