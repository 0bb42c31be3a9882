/**
 * The bare one-activity workflow bench/workflows.ts compares journeys against (bench/baselines.ts
 * bundles this file for its own worker): the least a Temporal execution that does any work costs on
 * this dev server, i.e. one start, two workflow tasks and one activity task round trip.
 */
import { proxyActivities } from '@temporalio/workflow';

export interface BareActivities {
  noop(): Promise<void>;
}

const { noop } = proxyActivities<BareActivities>({ startToCloseTimeout: '1 minute' });

export async function bareOneActivity(): Promise<void> {
  await noop();
}
