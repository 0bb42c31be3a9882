import { CancellationScope, isCancellation, setHandler, TemporalFailure, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { JsonValue } from '../../db/entities/contact';
import type { StepStart } from '../../db/journeys/executions';
import { type TrackedEventMessage, trackedEventSignal } from '../signals';
import { CurrentStepKey, WaitingForEventKey } from '../search-attributes';
import { FIRST_STEP_SHOWN_AT_START_WALK, PATCHES } from '../patches';
import { journeyActivities } from './steps/proxies';
import { nextStepId, plannedSuccessor, type RunnableStep, stepAt } from './graph-walk';
import { stepHandlers } from './steps';
import type { JourneyInput, SentEmails, StepBegan, StepContext, StepOutcome } from './steps/types';
import { journeyPatched } from './journey-patched';

export type { JourneyInput } from './steps/types';

function runStep(step: RunnableStep, ctx: StepContext): Promise<StepOutcome> {
  const handler = stepHandlers[step.type] as (config: unknown, ctx: StepContext) => Promise<StepOutcome>;
  return handler(step.config, ctx);
}

/** Where the Web UI shows an execution: the current step's type, and the event it waits for. */
function showCurrentStep(start: StepStart): void {
  upsertSearchAttributes([
    { key: CurrentStepKey, value: start.stepType },
    { key: WaitingForEventKey, value: start.waitingForEvent },
  ]);
}

/**
 * One execution of a workflow for one contact. It walks the graph it was started with (so edits
 * never reach it), one handler per step type, and keeps its status and step history in Postgres
 * through local activities, so the API can list executions without asking Temporal: the first
 * step's start (unless the dispatcher recorded it), then one transition per step (its end, and
 * the next step's start or the execution's end), which a step that never branches may record in
 * its own local activity (SEND_EMAIL does, with its email).
 */
export async function journey(input: JourneyInput): Promise<void> {
  const events: TrackedEventMessage[] = [];
  setHandler(trackedEventSignal, (event) => void events.push(event));
  const context = { ...input.context };
  const emails: SentEmails = { byStep: new Map() };
  try {
    if (journeyPatched(input, PATCHES.journeyStepTransitions)) await walk(input, context, events, emails);
    else await walkStepByStep(input, context, events, emails);
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

async function walk(input: JourneyInput, context: Record<string, JsonValue>, events: TrackedEventMessage[], emails: SentEmails): Promise<void> {
  const firstId = nextStepId(input.graph, input.graph.entryStepId, undefined);
  if (firstId === undefined) {
    await journeyActivities.finishExecution({ executionId: input.executionId, status: 'COMPLETED' });
    return;
  }
  // A step begins just before its start is recorded (StepContext.began).
  const fromRecordedStart = journeyPatched(input, PATCHES.journeyWaitFromRecordedStart);
  const beginning = (): StepBegan | undefined => (fromRecordedStart ? { at: Date.now(), eventsSeen: events.length } : undefined);
  let current = stepAt(input.graph, input.executionId, firstId, 1);
  // One the dispatcher recorded began before this execution started.
  let began = fromRecordedStart && input.firstStepRecorded ? { at: workflowInfo().startTime.getTime(), eventsSeen: 0 } : beginning();
  if ((input.walk ?? 0) < FIRST_STEP_SHOWN_AT_START_WALK) showCurrentStep(current.start);
  // The dispatcher records it with its claim (temporal/triggers/dispatch.ts), and says so.
  if (!input.firstStepRecorded) await journeyActivities.recordStepStarted(current.start);
  for (;;) {
    const { stepId, seq } = current.start;
    // For a step that records its own end (SEND_EMAIL): what follows its unlabelled transition.
    const planned = plannedSuccessor(input.graph, input.executionId, stepId, seq);
    // Such a step records the next one's start as it runs.
    const nextBegan = planned ? beginning() : undefined;
    const outcome = await runStep(current.step, { input, stepId, seq, context, events, emails, successor: planned?.successor, began });
    if (outcome.transitionRecorded) {
      if (!planned?.next) return;
      showCurrentStep(planned.next.start);
      current = planned.next;
      began = nextBegan;
      continue;
    }
    const finished = { executionId: input.executionId, seq, status: 'COMPLETED' as const, branch: outcome.branch ?? null, output: outcome.output, context };
    const nextId = outcome.exit === undefined ? nextStepId(input.graph, stepId, outcome.branch) : undefined;
    if (nextId === undefined) {
      const finish = outcome.exit === undefined ? { status: 'COMPLETED' as const } : { status: 'EXITED' as const, exitReason: outcome.exit };
      await journeyActivities.recordStepTransition({ finished, next: { finish: { executionId: input.executionId, ...finish } } });
      return;
    }
    const next = stepAt(input.graph, input.executionId, nextId, seq + 1);
    showCurrentStep(next.start);
    began = beginning();
    await journeyActivities.recordStepTransition({ finished, next: { start: next.start } });
    current = next;
  }
}

/** The walk of executions started before PATCHES.journeyStepTransitions: two activities per step, and one at the end. */
async function walkStepByStep(
  input: JourneyInput,
  context: Record<string, JsonValue>,
  events: TrackedEventMessage[],
  emails: SentEmails,
): Promise<void> {
  let seq = 0;
  let stepId = nextStepId(input.graph, input.graph.entryStepId, undefined);
  while (stepId !== undefined) {
    seq += 1;
    const { step, start } = stepAt(input.graph, input.executionId, stepId, seq);
    showCurrentStep(start);
    await journeyActivities.recordStepStarted(start);
    const outcome = await runStep(step, { input, stepId, seq, context, events, emails });
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
}

/** A failed activity arrives wrapped ("Activity task failed"); the reason is at the end of the cause chain. */
function rootMessage(err: unknown): string {
  let e = err;
  while (e instanceof TemporalFailure && e.cause) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
