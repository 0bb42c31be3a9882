import type { StepStart, StepSuccessor } from '../../db/journeys/executions';
import type { Branch, GraphStep, JourneyGraph, UserStepType } from '../../db/journeys/steps';

/**
 * How an execution moves through its graph, shared by the journey workflow and the trigger
 * dispatcher (which records the first step's start with its claim): plain functions of the graph,
 * safe in the workflow bundle.
 */

export type RunnableStep = Exclude<GraphStep, { type: 'TRIGGER' }>;

/** Steps the execution shows as WAITING while they hold it (a timer or an event). */
export const WAITING_STEPS: ReadonlySet<UserStepType> = new Set(['DELAY', 'WAIT_FOR_EVENT']);

/** The transition to follow: the one labelled with the outcome's branch, else the unlabelled one. */
export function nextStepId(graph: JourneyGraph, from: string, branch: Branch | undefined): string | undefined {
  const out = graph.transitions.filter((t) => t.from === from);
  return (out.find((t) => branch !== undefined && t.branch === branch) ?? out.find((t) => t.branch === null))?.to;
}

function runnable(graph: JourneyGraph, stepId: string): RunnableStep | undefined {
  const step = graph.steps[stepId];
  return step && step.type !== 'TRIGGER' ? step : undefined;
}

/** The step the graph names, checked runnable, with what its start records. */
export function stepAt(graph: JourneyGraph, executionId: string, stepId: string, seq: number): { step: RunnableStep; start: StepStart } {
  const step = runnable(graph, stepId);
  if (!step) throw new Error(`Step ${stepId} is not a runnable step of this graph`);
  const waitingForEvent = step.type === 'WAIT_FOR_EVENT' ? step.config.eventName : null;
  return {
    step,
    start: { executionId, seq, stepId, stepType: step.type, waiting: WAITING_STEPS.has(step.type as UserStepType), waitingForEvent },
  };
}

/**
 * Where a step's unlabelled transition leads: the next step with its start, or the execution's
 * end; undefined when it names a step that cannot run (the walk fails on it only if taken).
 */
export function plannedSuccessor(
  graph: JourneyGraph,
  executionId: string,
  stepId: string,
  seq: number,
): { next?: { step: RunnableStep; start: StepStart }; successor: StepSuccessor } | undefined {
  const id = nextStepId(graph, stepId, undefined);
  if (id === undefined) return { successor: { finish: { executionId, status: 'COMPLETED' } } };
  if (!runnable(graph, id)) return undefined;
  const next = stepAt(graph, executionId, id, seq + 1);
  return { next, successor: { start: next.start } };
}

/** The first step's start, without the execution id; undefined when the graph has no runnable first step. */
export function firstStepStart(graph: JourneyGraph): Omit<StepStart, 'executionId'> | undefined {
  const id = nextStepId(graph, graph.entryStepId, undefined);
  if (id === undefined || !runnable(graph, id)) return undefined;
  const { executionId: _, ...start } = stepAt(graph, '', id, 1).start;
  return start;
}
