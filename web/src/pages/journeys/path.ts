import { ApiError } from '../../api/client';
import { ownProblem, STEP_LABELS } from './stepTypes';
import type { Execution, GraphProblems, JourneyDetail, Transition } from './types';

/** What an execution's step history draws on the graph. */
export interface ExecutionPath {
  /** Steps it has been through (the trigger included once it started). */
  visited: Set<string>;
  /** Transitions it followed. */
  taken: Set<string>;
  /** The step it is on while RUNNING or WAITING. */
  current: string | null;
  failed: Set<string>;
}

/**
 * The history lists the steps after the trigger in order, each with the branch it ended on; the
 * transition followed between two steps is the one labelled with that branch, else the unlabelled one.
 */
export function executionPath(execution: Execution, transitions: ReadonlyArray<Transition>, entryStepId: string | undefined): ExecutionPath {
  const history = [...(execution.steps ?? [])].sort((a, b) => a.seq - b.seq);
  const visited = new Set<string>();
  const taken = new Set<string>();
  const failed = new Set<string>();
  const follow = (from: string, to: string, branch: string | null) => {
    const candidates = transitions.filter((t) => t.fromStepId === from && t.toStepId === to);
    const t = candidates.find((c) => branch !== null && c.branch === branch) ?? candidates.find((c) => c.branch === null) ?? candidates[0];
    if (t) taken.add(t.id);
  };
  const first = history[0];
  if (entryStepId) {
    visited.add(entryStepId);
    if (first) follow(entryStepId, first.stepId, null);
  }
  history.forEach((step, i) => {
    visited.add(step.stepId);
    if (step.status === 'FAILED') failed.add(step.stepId);
    const next = history[i + 1];
    if (next) follow(step.stepId, next.stepId, step.branch);
  });
  const active = execution.status === 'RUNNING' || execution.status === 'WAITING';
  return { visited, taken, current: active ? execution.currentStepId : null, failed };
}

/** The service's 422 about a graph, sorted by the step or transition each problem names. */
export function graphProblems(error: unknown): GraphProblems | null {
  if (!(error instanceof ApiError) || error.fields.length === 0) return null;
  const problems: GraphProblems = { steps: {}, transitions: {}, graph: [] };
  for (const { field, message } of error.fields) {
    const [kind, id] = field.split('.', 2) as [string, string | undefined];
    if (kind === 'steps' && id) (problems.steps[id] ??= []).push(message);
    else if (kind === 'transitions' && id) (problems.transitions[id] ??= []).push(message);
    else problems.graph.push(message);
  }
  const any = Object.keys(problems.steps).length + Object.keys(problems.transitions).length > 0;
  return any ? problems : null;
}

/**
 * The same refusal worded for the editor: each problem under the step or connection it is about
 * (named as on the graph rather than by id), and the headline without the list it repeats.
 */
export function readableGraphError(error: ApiError, journey: JourneyDetail): ApiError {
  const title = (id: string) => {
    const step = journey.steps.find((s) => s.id === id);
    return step ? step.name || `${STEP_LABELS[step.type]} step` : id;
  };
  const fields = error.fields.map(({ field, message, code }) => {
    const [kind, id = ''] = field.split('.', 2);
    if (kind === 'steps') return { field: title(id), message: ownProblem(message, id), code };
    const t = kind === 'transitions' ? journey.transitions.find((x) => x.id === id) : undefined;
    if (t) return { field: `Connection from ${title(t.fromStepId)} to ${title(t.toStepId)}`, message, code };
    return { field: kind === 'graph' ? 'Graph' : field, message, code };
  });
  const headline = error.message.match(/^(.*?\d+ problems?)(:|$)/)?.[1] ?? error.message;
  return new ApiError(error.status, error.code, headline, 'Fix what is outlined on the graph, then try again.', fields);
}
