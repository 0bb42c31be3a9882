import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { loadCompileContext } from '../conditions/compile-context';
import type { Condition } from '../conditions/grammar';
import { type CompiledSql, compileCondition } from '../conditions/sql';
import { queryOne } from '../sql';

/**
 * `select c.id …` of the members of a segment, for use as a subquery or a cursor source (campaign
 * audiences): a static segment's members, a dynamic segment's contacts matching its condition now.
 */
export async function segmentContactsSql(em: EntityManager, projectId: string, segmentId: string): Promise<CompiledSql> {
  const segment = await queryOne<{ type: 'DYNAMIC' | 'STATIC'; condition: Condition | null }>(
    em,
    'select type, condition from segments where project_id = ? and id = ?',
    [projectId, segmentId],
  );
  if (!segment) throw notFound('segment');
  if (segment.type === 'STATIC' || !segment.condition) {
    return {
      sql: 'select c.id from contacts c join segment_members sm on sm.contact_id = c.id where sm.segment_id = ? and c.project_id = ?',
      params: [segmentId, projectId],
    };
  }
  const ctx = await loadCompileContext(em, projectId, [segment.condition]);
  const where = compileCondition(segment.condition, { ...ctx, expanding: new Set([segmentId]) });
  return { sql: `select c.id from contacts c where c.project_id = ? and (${where.sql})`, params: [projectId, ...where.params] };
}
