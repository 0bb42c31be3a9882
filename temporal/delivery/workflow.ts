import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  continueAsNew,
  defineQuery,
  ParentClosePolicy,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { DeliveryEngineActivities, EmailToRetry } from './activities';
import { workflowIds } from '../ids';
import { ProjectIdKey } from '../search-attributes';
import { sendEmails } from './send-emails-workflow';
import { PATCHES } from '../patches';

export interface DeliveryEngineInput {
  /** The task queue whose emails this engine sends (emails.queue). */
  queue: string;
  /** Which of the queue's engines this is (workflowIds.deliveryEngine). */
  index: number;
  /** Each round (one activity) takes new emails for this long. */
  roundSeconds: number;
  /** Longest wait between attempts of an email in its retry workflow, and between probes of an unreachable relay. */
  maxRetryIntervalSeconds: number;
  /** The breaker was open when the previous run continued as new: this one goes on probing. */
  relayDown?: RelayDown;
}

/** An outage of the relay as this engine saw it. */
export interface RelayDown {
  /** When a send first failed to reach the relay (ISO 8601). */
  since: string;
  /** The last connection error. */
  error: string;
  /** Probes that found it still unreachable; the wait before the next one doubles with each. */
  failedProbes: number;
}

/** What the engine's `deliveryEngineState` query answers (also shown as the execution's current details). */
export type DeliveryEngineState =
  | { relay: 'reachable' }
  | (RelayDown & { relay: 'unreachable'; /** When the next probe starts; null while one runs (ISO 8601). */ nextProbeAt: string | null });

export const deliveryEngineStateQuery = defineQuery<DeliveryEngineState>('deliveryEngineState');


/** Rounds per run before continue-as-new: a few thousand history events at most. */
const ROUNDS_PER_RUN = 200;
/** Emails a probe of an unreachable relay sends: more than one, so one email's own fault cannot keep the breaker open. */
const PROBE_EMAILS = 3;
const FIRST_PROBE_AFTER_MS = 1000;

/**
 * One delivery engine of a task queue, running for as long as the service does (started by every
 * worker, temporal/engines.ts). It supervises; the sending happens in its rounds, each one
 * long-running activity that drains the queue's due emails (temporal/delivery/activities.ts).
 * An email that got a transient failure leaves the fast path for its own retry workflow
 * (sendEmails, id `send:<email id>`, ProjectId set), which backs off up to the retry ceiling and
 * shows the operator where that email stands; nobody else's mail waits for it.
 *
 * A relay that cannot be reached at all is not the emails' fault: the round gives them back as
 * QUEUED and the engine's breaker opens. It waits (a timer, doubling up to the retry ceiling, with
 * some jitter so the queue's engines do not probe in step), then runs a probe round of a few
 * emails; full rounds resume once the relay takes mail again. Its state is the
 * `deliveryEngineState` query and the execution's current details in the Web UI.
 */
export async function deliveryEngine(input: DeliveryEngineInput): Promise<void> {
  const options = {
    startToCloseTimeout: `${input.roundSeconds + 120} seconds`,
    // A dead worker's round is retried elsewhere within seconds.
    heartbeatTimeout: '10 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
  } as const;
  const { deliverQueuedEmails } = proxyActivities<DeliveryEngineActivities>(options);
  const probe = proxyActivities<DeliveryEngineActivities>({ ...options, summary: `probe the relay with up to ${PROBE_EMAILS} emails` }).deliverQueuedEmails;
  let down = input.relayDown;
  let nextProbeAt: number | null = null;
  setHandler(deliveryEngineStateQuery, () => (down ? { relay: 'unreachable', ...down, nextProbeAt: iso(nextProbeAt) } : { relay: 'reachable' }), {
    description: 'Whether this engine reaches the SMTP relay; when not, since when and when it probes next',
  });

  for (let round = 0; round < ROUNDS_PER_RUN && !workflowInfo().continueAsNewSuggested; round++) {
    if (down) {
      const waitMs = probeDelayMs(down.failedProbes, input.maxRetryIntervalSeconds);
      nextProbeAt = Date.now() + waitMs;
      setCurrentDetails(
        `**Relay unreachable** since ${down.since}: ${down.error}. ${down.failedProbes} probe(s) failed since; ` +
          `next probe at ${iso(nextProbeAt)}. This engine's emails wait as QUEUED meanwhile.`,
      );
      await sleep(waitMs, { summary: `relay unreachable since ${down.since}: wait before probing it` });
      nextProbeAt = null;
    }
    const result = down
      ? await probe({ queue: input.queue, maxSeconds: input.roundSeconds, probe: PROBE_EMAILS })
      : await deliverQueuedEmails({ queue: input.queue, maxSeconds: input.roundSeconds });
    await Promise.all(result.retries.map((email) => startRetry(email, input.maxRetryIntervalSeconds)));
    if (result.relayUnreachable && patched(PATCHES.relayBreaker)) {
      down = down
        ? { ...down, error: result.relayUnreachable.error, failedProbes: down.failedProbes + 1 }
        : { ...result.relayUnreachable, failedProbes: 0 };
    } else if (down) {
      setCurrentDetails(`Relay reachable again since ${iso(Date.now())}; it was unreachable from ${down.since}.`);
      down = undefined;
    }
  }
  await continueAsNew<typeof deliveryEngine>({ ...input, relayDown: down });
}

/** Doubles from a second up to the ceiling, less up to a fifth at random (deterministic: the workflow's own PRNG). */
function probeDelayMs(failedProbes: number, maxSeconds: number): number {
  const full = Math.min(maxSeconds * 1000, FIRST_PROBE_AFTER_MS * 2 ** Math.min(failedProbes, 20));
  return Math.round(full * (0.8 + 0.2 * Math.random()));
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

async function startRetry(email: EmailToRetry, maxRetryIntervalSeconds: number): Promise<void> {
  try {
    await startChild(sendEmails, {
      workflowId: workflowIds.sendEmails(email.emailId),
      args: [{ emailIds: [email.emailId], maxRetryIntervalSeconds }],
      // The retry outlives this run of the engine (continue-as-new) and the engine itself.
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: [{ key: ProjectIdKey, value: email.projectId }],
      staticSummary: `retry email ${email.emailId}`,
    });
  } catch (err) {
    // Passed on again while its retry workflow still runs: that one carries on.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}
