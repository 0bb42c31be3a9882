import { CancellationScope, isCancellation, setHandler, TemporalFailure, upsertSearchAttributes } from '@temporalio/workflow';
import type { Branch, GraphStep, JourneyGraph, UserStepType } from '../../db/journeys/steps';
import { type TrackedEventMessage, trackedEventSignal } from '../signals';
import { CurrentStepKey, WaitingForEventKey } from '../search-attributes';
import { journeyActivities } from './steps/proxies';
import { stepHandlers, WAITING_STEPS } from './steps';
import type { JourneyInput, StepContext, StepOutcome } from './steps/types';

export type { JourneyInput } from './steps/types';

/** The transition to follow: the one labelled with the outcome's branch, else the unlabelled one. */
function nextStepId(graph: JourneyGraph, from: string, branch: Branch | undefined): string | undefined {
  const out = graph.transitions.filter((t) => t.from === from);
  return (out.find((t) => branch !== undefined && t.branch === branch) ?? out.find((t) => t.branch === null))?.to;
}

function runStep(step: Exclude<GraphStep, { type: 'TRIGGER' }>, ctx: StepContext): Promise<StepOutcome> {
  const handler = stepHandlers[step.type] as (config: unknown, ctx: StepContext) => Promise<StepOutcome>;
  return handler(step.config, ctx);
}

/**
 * One execution of a workflow for one contact. It walks the graph it was started with (so edits
 * never reach it), one handler per step type, and keeps its status and step history in Postgres
 * through activities, so the API can list executions without asking Temporal.
 */
export async function journey(input: JourneyInput): Promise<void> {
  const events: TrackedEventMessage[] = [];
  setHandler(trackedEventSignal, (event) => void events.push(event));
  const context = { ...input.context };
  let seq = 0;
  try {
    let stepId = nextStepId(input.graph, input.graph.entryStepId, undefined);
    while (stepId !== undefined) {
      const step = input.graph.steps[stepId];
      if (!step || step.type === 'TRIGGER') throw new Error(`Step ${stepId} is not a runnable step of this graph`);
      seq += 1;
      const waitingFor = step.type === 'WAIT_FOR_EVENT' ? step.config.eventName : null;
      upsertSearchAttributes([
        { key: CurrentStepKey, value: step.type },
        { key: WaitingForEventKey, value: waitingFor },
      ]);
      await journeyActivities.recordStepStarted({
        executionId: input.executionId,
        seq,
        stepId,
        stepType: step.type,
        waiting: WAITING_STEPS.has(step.type as UserStepType),
        waitingForEvent: waitingFor,
      });
      const outcome = await runStep(step, { input, stepId, seq, context, events });
      await journeyActivities.recordStepFinished({
        executionId: input.executionId,
        seq,
        status: 'COMPLETED',
        branch: outcome.branch ?? null,
        output: outcome.output,
        context,
      });
      if (outcome.exit !== undefined) {
        await journeyActivities.finishExecution({ executionId: input.executionId, status: 'EXITED', exitReason: outcome.exit });
        return;
      }
      stepId = nextStepId(input.graph, stepId, outcome.branch);
    }
    await journeyActivities.finishExecution({ executionId: input.executionId, status: 'COMPLETED' });
  } catch (err) {
    // The final status is written even though the workflow is being cancelled; nothing else runs.
    const cancelled = isCancellation(err);
    await CancellationScope.nonCancellable(() =>
      journeyActivities.finishExecution({
        executionId: input.executionId,
        status: cancelled ? 'CANCELLED' : 'FAILED',
        ...(cancelled ? {} : { error: rootMessage(err) }),
      }),
    );
    throw err;
  } finally {
    upsertSearchAttributes([
      { key: CurrentStepKey, value: null },
      { key: WaitingForEventKey, value: null },
    ]);
  }
}

/** A failed activity arrives wrapped ("Activity task failed"); the reason is at the end of the cause chain. */
function rootMessage(err: unknown): string {
  let e = err;
  while (e instanceof TemporalFailure && e.cause) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
