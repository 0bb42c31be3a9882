import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, type FieldError } from '../../errors';
import { query, queryOne } from '../sql';
import { type GraphIssue, type ValidatableGraph, validateJourneyGraph } from './graph';
import { journeyNotFound, readJourney } from './rows';
import type { GraphStep, JourneyGraph } from './steps';

/**
 * A journey's graph as stored: loaded for executions, and checked (graph.ts plus what only the
 * database knows, such as deleted templates) whenever an enabled journey's definition changes.
 */

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

/** The graph problems as validation errors: `errors[].field` is the step, transition or `graph`. */
export const graphErrors = (issues: GraphIssue[]): FieldError[] =>
  issues.map((i) => ({ field: i.path, message: i.message, code: 'invalid_graph' }));

export async function assertValidGraph(em: EntityManager, journeyId: string, headline: (n: number) => string, suggestion: string): Promise<void> {
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
export async function touchAndRevalidate(em: EntityManager, journeyId: string): Promise<void> {
  const row = await queryOne<{ enabled: boolean }>(em, 'update workflows set updated_at = now() where id = ? returning enabled', [journeyId]);
  if (!row!.enabled) return;
  await assertValidGraph(
    em,
    journeyId,
    (n) => `This change would leave the enabled workflow with ${n} graph problem${n === 1 ? '' : 's'}, so it was not made`,
    'Make the change so the graph stays valid, or disable the workflow (PATCH {"enabled": false}), edit it, and enable it again.',
  );
}
