import type { JsonValue } from '../../../db/entities/contact';
import type { StepSuccessor } from '../../../db/journeys/executions';
import type { Branch, JourneyGraph, StepConfigs, UserStepType } from '../../../db/journeys/steps';
import type { TrackedEventMessage } from '../../signals';

export interface JourneyInput {
  executionId: string;
  projectId: string;
  workflowId: string;
  contactId: string;
  graph: JourneyGraph;
  context: Record<string, JsonValue>;
  /**
   * Multiplies DELAY and WAIT_FOR_EVENT durations: JOURNEY_TIME_SCALE (1 in production), divided
   * by a test run's time scale (temporal/triggers/dispatch.ts startExecution).
   */
  timeScale: number;
  /**
   * Longest pause between delivery attempts of its SEND_EMAIL steps (SEND_RETRY_MAX_INTERVAL_SECONDS
   * when it started); executions started before it was passed use 300 s.
   */
  maxRetryIntervalSeconds?: number;
  /** The first step's start is in Postgres already (written with the claim); absent in executions started before. */
  firstStepRecorded?: boolean;
  /** temporal/patches.ts JOURNEY_WALK when startJourney started it; absent in executions started before. */
  walk?: number;
}

/** What a step handler sees: the execution, its context (mutable) and the events signalled so far. */
export interface StepContext {
  input: JourneyInput;
  stepId: string;
  seq: number;
  context: Record<string, JsonValue>;
  events: readonly TrackedEventMessage[];
  /** The emails this execution's SEND_EMAIL steps queued, so a wait for an email event waits for its own. */
  emails: SentEmails;
  /**
   * When the step began: the workflow time and how many events had been signalled, taken just
   * before its start was recorded in Postgres. From that record on, the dispatcher signals an event
   * the step waits for, so a wait counts events from here, not from when its handler ran later.
   * Undefined in executions started before (temporal/patches.ts journeyWaitFromRecordedStart).
   */
  began?: StepBegan;
  /**
   * What follows the step if it ends on its unlabelled transition (no branch, no exit). A step
   * whose outcome never picks a branch may record its end and this in its own local activity,
   * and says so (StepOutcome.transitionRecorded); undefined where the walk records every transition.
   */
  successor?: StepSuccessor;
}

export interface StepOutcome {
  /** Which outgoing transition to take; undefined = the unlabelled one. */
  branch?: Branch;
  /** Ends the execution as EXITED with this reason. */
  exit?: string;
  /** Recorded in the step history. */
  output?: JsonValue;
  /** The step recorded its end and StepContext.successor itself; the walk goes straight on. */
  transitionRecorded?: boolean;
}

export interface StepBegan {
  at: number;
  eventsSeen: number;
}

/** The email each SEND_EMAIL step of the execution queued (the step's latest run), and the last one queued. */
export interface SentEmails {
  byStep: Map<string, string>;
  last?: string;
}

/** What a SEND_EMAIL step records as its output, from what queueing its email gave. */
export const sendEmailOutput = (queued: { emailId?: string; skipped?: string }): JsonValue =>
  queued.emailId ? { emailId: queued.emailId } : { skipped: queued.skipped ?? 'unknown' };

export type StepHandler<K extends UserStepType> = (config: StepConfigs[K], ctx: StepContext) => Promise<StepOutcome>;
