import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config';
import type { JsonValue } from '../../db/entities/contact';
import { activeExecutionIdsOfContact, claimExecution, type ExecutionClaim, journeysTriggeredBy, recordTemporalRunId, releaseExecution } from '../../db/journeys/executions';
import { executionIdFor } from '../../db/events/trigger-outbox';
import { loadGraph } from '../../db/journeys/stored-graph';
import type { JourneyGraph } from '../../db/journeys/steps';
import { isEmailOutcome } from '../../db/record-events';
import type { TemporalGateway } from '../client';
import { firstStepStart } from '../journeys/graph-walk';
import { type JourneyStart, signalTrackedEvent, startJourney } from '../journeys/lifecycle';

export interface TriggerDeps {
  /** Not inside a transaction: a claimed execution must be visible to its workflow at once. */
  em: EntityManager;
  temporal: TemporalGateway;
  config: Pick<Config, 'journeyTimeScale' | 'sendRetryMaxIntervalSeconds'>;
  /**
   * Definition lookups (which workflows an event triggers, a workflow's graph); a caller that
   * delivers a batch of events passes memoised ones (journeyLookups), so a batch reads each once.
   */
  lookups?: JourneyLookups;
}

export interface JourneyLookups {
  triggeredBy(projectId: string, eventName: string): Promise<{ id: string; allowReentry: boolean }[]>;
  graph(workflowId: string): ReturnType<typeof loadGraph>;
}

/** Lookups that read each answer once for as long as they are kept (one dispatcher batch). */
export function journeyLookups(em: EntityManager): JourneyLookups {
  const triggered = new Map<string, ReturnType<JourneyLookups['triggeredBy']>>();
  const graphs = new Map<string, ReturnType<typeof loadGraph>>();
  const once = <T>(map: Map<string, Promise<T>>, key: string, load: () => Promise<T>) => {
    let found = map.get(key);
    if (!found) {
      found = load();
      map.set(key, found);
      found.catch(() => map.delete(key));
    }
    return found;
  };
  return {
    triggeredBy: (projectId, eventName) => once(triggered, `${projectId}\n${eventName}`, () => journeysTriggeredBy(em, projectId, eventName)),
    graph: (workflowId) => once(graphs, workflowId, () => loadGraph(em, workflowId)),
  };
}

/**
 * Enters a contact into a workflow: claims the entry in Postgres (the re-entry rule), then
 * starts the execution with the graph as it is now. The claim and the start cannot part: with an
 * `executionId` (an event's, executionIdFor) a failed start leaves the claim for the caller's
 * retry, which finds it and starts that execution; without one (a start from the dashboard) the
 * claim is undone and the error goes back to the user, and a start that succeeded keeps its
 * Temporal run id for the Web UI link (the dispatcher's starts skip that write).
 *
 * A test run (`input.test`) is the same execution with its timers divided by its time scale: the
 * workflow's input carries the product as its timeScale, so the workflow code is the same.
 * `eager` says whether the worker took the first workflow task with the start (absent for a repeat,
 * which starts nothing); otherwise it waits in Temporal's queue for a poll.
 */
export async function startExecution(deps: TriggerDeps, input: ExecutionClaim): Promise<{ id: string; eager?: boolean } | null> {
  // The graph first: the claim records the first step's start with it, one activity fewer in the workflow.
  const graph = await (deps.lookups ? deps.lookups.graph(input.journeyId) : loadGraph(deps.em, input.journeyId));
  const claim = await claimExecution(deps.em, { ...input, emailWaits: emailWaitsOf(graph) }, firstStepStart(graph));
  if (!claim) return null;
  let started: JourneyStart | undefined;
  try {
    started = await startJourney(
      deps.temporal,
      {
        executionId: claim.id,
        projectId: input.projectId,
        workflowId: input.journeyId,
        contactId: input.contactId,
        graph,
        context: input.context,
        timeScale: deps.config.journeyTimeScale / (input.test?.timeScale ?? 1),
        maxRetryIntervalSeconds: deps.config.sendRetryMaxIntervalSeconds,
        firstStepRecorded: claim.firstStepRecorded,
      },
      { ...claim.names, ...(input.test ? { testTimeScale: input.test.timeScale } : {}) },
    );
  } catch (err) {
    if (!input.executionId) await releaseExecution(deps.em, claim.id, input);
    throw err;
  }
  if (!input.executionId && started) await recordTemporalRunId(deps.em, claim.id, started.runId);
  return { id: claim.id, eager: started?.eagerlyStarted };
}

/** The email outcomes the graph's WAIT_FOR_EVENT steps wait for. */
const emailWaitsOf = (graph: JourneyGraph): string[] => [
  ...new Set(Object.values(graph.steps).flatMap((s) => (s.type === 'WAIT_FOR_EVENT' && isEmailOutcome(s.config.eventName) ? [s.config.eventName] : []))),
];

/**
 * What a recorded event does to workflows: the contact's executions that waited for it when it
 * was recorded receive it (their WAIT_FOR_EVENT decides whether it is the one), then, unless a
 * journey caused it, every enabled workflow it triggers starts an execution with the event data
 * as context, under an id derived from the event, so repeating all of this after a crash starts
 * nothing twice. `eager` and `queued` count the starts whose first workflow task the worker took
 * with the start and those whose task waits in Temporal's queue.
 */
export async function deliverTrackedEvent(
  deps: TriggerDeps,
  event: { projectId: string; contactId: string; eventId: string; name: string; trackedAt: string; context: Record<string, JsonValue> },
  /** The executions waiting when the event was recorded (the outbox row keeps them); the contact's active ones when absent. */
  signalExecutions?: string[],
  opts: { startsJourneys: boolean } = { startsJourneys: true },
): Promise<{ eager: number; queued: number }> {
  const running = signalExecutions ?? (await activeExecutionIdsOfContact(deps.em, event.projectId, event.contactId));
  await Promise.all(
    running.map((id) =>
      signalTrackedEvent(deps.temporal, id, { eventId: event.eventId, name: event.name, data: event.context, trackedAt: event.trackedAt }),
    ),
  );
  let eager = 0;
  let queued = 0;
  if (!opts.startsJourneys) return { eager, queued };
  const triggered = deps.lookups
    ? await deps.lookups.triggeredBy(event.projectId, event.name)
    : await journeysTriggeredBy(deps.em, event.projectId, event.name);
  for (const workflow of triggered) {
    const execution = await startExecution(deps, {
      projectId: event.projectId,
      journeyId: workflow.id,
      contactId: event.contactId,
      allowReentry: workflow.allowReentry,
      context: event.context,
      executionId: executionIdFor(event.eventId, workflow.id),
    });
    if (execution?.eager === true) eager++;
    if (execution?.eager === false) queued++;
  }
  return { eager, queued };
}
