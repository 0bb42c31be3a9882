import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import type { TemporalGateway } from '../client';
import { workflowIds } from '../ids';
import { ContactIdKey, CurrentStepKey, ProjectIdKey, TidingsWorkflowIdKey, WaitingForEventKey } from '../search-attributes';
import { firstStepStart } from './graph-walk';
import { JOURNEY_WALK } from '../patches';
import { trackedEventSignal, type TrackedEventMessage } from '../signals';
import type { journey, JourneyInput } from './workflow';

/** A started journey: its run, and whether the worker took its first workflow task with the start (TemporalGateway.startsEagerly). */
export interface JourneyStart {
  runId: string;
  eagerlyStarted: boolean;
}

/**
 * Starts one execution; its id is the execution row's, so a repeat (a dispatcher retrying after
 * a crash) finds it started, even long finished, and starts nothing. `names` label it in the
 * Temporal UI (workflow name, contact email, and a test run's time scale); ids stand in without
 * them. Returns undefined for a repeat.
 */
export async function startJourney(
  temporal: TemporalGateway,
  input: JourneyInput,
  names?: { workflow: string; contact: string; testTimeScale?: number },
): Promise<JourneyStart | undefined> {
  // The first step shows from the start, and the walk says which patches apply: the workflow
  // upserts nothing before that step's end (each upsert is one more visibility write in Temporal).
  const first = firstStepStart(input.graph);
  const test = names?.testTimeScale === undefined ? '' : `test run, timers ÷${names.testTimeScale} · `;
  const handle = await temporal.client.workflow
    .start<typeof journey>('journey', {
      taskQueue: temporal.taskQueue,
      workflowId: workflowIds.journey(input.executionId),
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      args: [{ ...input, walk: JOURNEY_WALK }],
      requestEagerStart: temporal.startsEagerly,
      staticSummary: `${test}journey ${names?.workflow ?? input.workflowId} · contact ${names?.contact ?? input.contactId}`,
      typedSearchAttributes: [
        { key: ProjectIdKey, value: input.projectId },
        { key: TidingsWorkflowIdKey, value: input.workflowId },
        { key: ContactIdKey, value: input.contactId },
        ...(first ? [{ key: CurrentStepKey, value: first.stepType }] : []),
        ...(first?.waitingForEvent ? [{ key: WaitingForEventKey, value: first.waitingForEvent }] : []),
      ],
    })
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      return undefined;
    });
  return handle && { runId: handle.firstExecutionRunId, eagerlyStarted: handle.eagerlyStarted };
}

/** Delivers a tracked event to an execution; one that has already ended is skipped (false). */
export async function signalTrackedEvent(temporal: TemporalGateway, executionId: string, event: TrackedEventMessage): Promise<boolean> {
  try {
    await temporal.client.workflow.getHandle(workflowIds.journey(executionId)).signal(trackedEventSignal, event);
    return true;
  } catch (err) {
    if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
    return false;
  }
}

/** Requests cancellation; the execution records CANCELLED itself before it stops. */
export async function cancelJourney(temporal: TemporalGateway, executionId: string): Promise<void> {
  try {
    await temporal.client.workflow.getHandle(workflowIds.journey(executionId)).cancel();
  } catch (err) {
    if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
  }
}

/**
 * Where an execution is in Temporal: its workflow id, its run when known, and its page in the Web
 * UI (`/namespaces/<ns>/workflows/<workflowId>/<runId>/history`). Without the run id the link
 * names the workflow only, and the Web UI opens its latest run: a journey's workflow id has one.
 */
export function journeyTemporalLink(
  settings: { namespace: string; uiUrl: string | undefined },
  executionId: string,
  runId: string | null,
): { workflowId: string; runId: string | null; url: string | null } {
  const workflowId = workflowIds.journey(executionId);
  const workflowPage = `${settings.uiUrl}/namespaces/${encodeURIComponent(settings.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
  const url = settings.uiUrl === undefined ? null : runId === null ? workflowPage : `${workflowPage}/${encodeURIComponent(runId)}/history`;
  return { workflowId, runId, url };
}
