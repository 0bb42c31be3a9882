import type { EntityManager } from '@mikro-orm/postgresql';
import { conditionKeys, fieldsLackingSlots } from '../../db/conditions/field-slots';
import { requireComputable } from '../../db/segments/membership';
import { getSegment, refreshSegmentCount, type SegmentDto } from '../../db/segments/segments';
import { requestFieldSlots } from '../../temporal/contact-fields/lifecycle';
import { computeSegment } from '../../temporal/segments/lifecycle';
import type { AppDeps } from '../context';
import { callTemporal } from './call-temporal';

/** POST /segments/:id/compute: a tracked DYNAMIC segment only, recomputed by its workflow, which the request waits for. */
export async function recomputeSegment(
  deps: Pick<AppDeps, 'temporal'>,
  em: EntityManager,
  projectId: string,
  segmentId: string,
): Promise<{ added: number; removed: number; total: number }> {
  await requireComputable(em, projectId, segmentId);
  return callTemporal(() => computeSegment(deps.temporal, projectId, segmentId));
}

/**
 * POST /segments and PATCH /segments/:id: the write, then a request that the fields its condition
 * names get their slot columns (db/conditions/field-slots.ts). Unlike the other use cases a failed
 * call undoes nothing and fails nothing: the segment is complete without slots (its conditions
 * compile to the JSON expression, the same members, only slower to count), so Temporal being down
 * costs speed, not the request. The next segment write, or refresh, asks again.
 */
export async function saveSegment(
  deps: Pick<AppDeps, 'temporal' | 'logger'>,
  projectId: string,
  write: () => Promise<SegmentDto>,
): Promise<SegmentDto> {
  const segment = await write();
  if (segment.condition && conditionKeys([segment.condition]).length > 0) askForFieldSlots(deps, projectId);
  return segment;
}

/**
 * POST /segments/:id/refresh: the count, then slots asked for if a field it names could have one and
 * has none ready (a segment saved while Temporal was down, or before slots existed).
 */
export async function refreshSegment(
  deps: Pick<AppDeps, 'temporal' | 'logger'>,
  em: EntityManager,
  projectId: string,
  segmentId: string,
): Promise<{ memberCount: number }> {
  const refreshed = await refreshSegmentCount(em, projectId, segmentId);
  const segment = await getSegment(em, projectId, segmentId);
  const keys = segment.condition ? conditionKeys([segment.condition]) : [];
  if (keys.length > 0 && (await fieldsLackingSlots(em, projectId, keys))) askForFieldSlots(deps, projectId);
  return refreshed;
}

/** Not awaited: the answer does not depend on it, and an unreachable Temporal must not hold the request up. */
function askForFieldSlots(deps: Pick<AppDeps, 'temporal' | 'logger'>, projectId: string): void {
  void requestFieldSlots(deps.temporal, projectId).catch((err: unknown) =>
    deps.logger.warn({ err, projectId }, 'could not ask for field slots; segment counts use the JSON expression until a later segment write'),
  );
}
