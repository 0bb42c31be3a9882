import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { loadCompileContext } from '../conditions/compile-context';
import type { Condition } from '../conditions/grammar';
import { type CompiledSql, compileCondition } from '../conditions/sql';
import { queryOne } from '../sql';

/**
 * The predicate, on `contacts c`, of the members of a segment (campaign audiences): a static
 * segment's members, a dynamic segment's contacts matching its condition now. A predicate rather
 * than a subquery of ids, so the planner reads the project's contacts once (a semi-join against the
 * same table took twice as long at 100,000 contacts); callers add `c.project_id = ?`.
 */
export async function segmentPredicate(em: EntityManager, projectId: string, segmentId: string): Promise<CompiledSql> {
  const segment = await queryOne<{ type: 'DYNAMIC' | 'STATIC'; condition: Condition | null }>(
    em,
    'select type, condition from segments where project_id = ? and id = ?',
    [projectId, segmentId],
  );
  if (!segment) throw notFound('segment');
  if (segment.type === 'STATIC' || !segment.condition) {
    return { sql: 'exists (select 1 from segment_members sm where sm.segment_id = ? and sm.contact_id = c.id)', params: [segmentId] };
  }
  const ctx = await loadCompileContext(em, projectId, [segment.condition]);
  return compileCondition(segment.condition, { ...ctx, expanding: new Set([segmentId]) });
}
