import type { EntityManager } from '@mikro-orm/postgresql';
import { requireComputable } from '../../db/segments/membership';
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
