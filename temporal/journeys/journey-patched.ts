import { patched } from '@temporalio/workflow';
import { JOURNEY_PATCHES_BY_WALK, type PatchId } from '../patches';
import type { JourneyInput } from './steps/types';

/** Whether a journey patch applies: said by the execution's walk, else asked of patched() (temporal/patches.ts JOURNEY_WALK). */
export function journeyPatched(input: JourneyInput, patch: PatchId): boolean {
  const from = JOURNEY_PATCHES_BY_WALK[patch];
  return (from !== undefined && (input.walk ?? 0) >= from) || patched(patch);
}
