import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, notFound, validationError } from '../../errors';
import { newId } from '../ids';
import { loadCompileContext } from '../conditions/compile-context';
import { type Condition, referencedSegmentIds } from '../conditions/grammar';
import { type CompileContext, compileCondition } from '../conditions/sql';
import { query, queryOne, transaction } from '../sql';

/**
 * Segments (docs/design.md, Conditions and Segments): DYNAMIC ones are a condition, compiled
 * to SQL (db/conditions/sql.ts) whenever they are counted, listed or computed; STATIC ones an explicit
 * member list (segment_members, edited in members.ts). `memberCount` is a cache, written when a segment
 * is created, its condition changes, its static members change, and by refresh and compute
 * (membership.ts).
 */

export type SegmentType = 'DYNAMIC' | 'STATIC';

export interface SegmentDto {
  id: string;
  name: string;
  description: string | null;
  type: SegmentType;
  condition: Condition | null;
  trackMembership: boolean;
  memberCount: number;
  memberCountUpdatedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface SegmentRow {
  id: string;
  name: string;
  description: string | null;
  type: SegmentType;
  condition: Condition | null;
  track_membership: boolean;
  member_count: number;
  member_count_updated_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const SEGMENT_COLUMNS = 'id, name, description, type, condition, track_membership, member_count, member_count_updated_at, created_at, updated_at';

const iso = (d: Date) => new Date(d).toISOString();

function toDto(row: SegmentRow): SegmentDto {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    type: row.type,
    condition: row.condition,
    trackMembership: row.track_membership,
    memberCount: row.member_count,
    memberCountUpdatedAt: row.member_count_updated_at ? iso(row.member_count_updated_at) : null,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export async function loadSegmentRow(em: EntityManager, projectId: string, id: string, lock = false): Promise<SegmentRow> {
  const row = await queryOne<SegmentRow>(
    em,
    `select ${SEGMENT_COLUMNS} from segments where project_id = ? and id = ?${lock ? ' for update' : ''}`,
    [projectId, id],
  );
  if (!row) throw notFound('segment');
  return row;
}

export async function listSegments(em: EntityManager, projectId: string): Promise<SegmentDto[]> {
  const rows = await query<SegmentRow>(em, `select ${SEGMENT_COLUMNS} from segments where project_id = ? order by id desc`, [projectId]);
  return rows.map(toDto);
}

export async function getSegment(em: EntityManager, projectId: string, id: string): Promise<SegmentDto> {
  return toDto(await loadSegmentRow(em, projectId, id));
}

// ---- Counting ----------------------------------------------------------------------------------------

/** The where clause of a dynamic segment's members (its own id guards against a self-reference). */
export async function memberPredicate(
  em: EntityManager,
  projectId: string,
  segment: { id?: string; condition: Condition },
  now?: Date,
): Promise<{ sql: string; params: unknown[] }> {
  const ctx: CompileContext = await loadCompileContext(em, projectId, [segment.condition], now);
  return compileCondition(segment.condition, segment.id ? { ...ctx, expanding: new Set([segment.id]) } : ctx);
}

export async function countMembers(em: EntityManager, projectId: string, segment: { id: string; type: SegmentType; condition: Condition | null }): Promise<number> {
  if (segment.type === 'STATIC' || !segment.condition) {
    const row = await queryOne<{ n: number }>(em, 'select count(*)::int as n from segment_members where segment_id = ?', [segment.id]);
    return row!.n;
  }
  const where = await memberPredicate(em, projectId, { id: segment.id, condition: segment.condition });
  const row = await queryOne<{ n: number }>(em, `select count(*)::int as n from contacts c where c.project_id = ? and (${where.sql})`, [
    projectId,
    ...where.params,
  ]);
  return row!.n;
}

export async function storeCount(em: EntityManager, id: string, count: number): Promise<SegmentRow> {
  const row = await queryOne<SegmentRow>(
    em,
    `update segments set member_count = ?, member_count_updated_at = now() where id = ? returning ${SEGMENT_COLUMNS}`,
    [count, id],
  );
  return row!;
}

/** POST /segments/:id/refresh: the count only; no membership writes, no events. */
export async function refreshSegmentCount(em: EntityManager, projectId: string, id: string): Promise<{ memberCount: number }> {
  const segment = await loadSegmentRow(em, projectId, id);
  const row = await storeCount(em, id, await countMembers(em, projectId, segment));
  return { memberCount: row.member_count };
}

// ---- Create, update, delete ------------------------------------------------------------------------

const conditionError = (message: string, code: string) => validationError([{ field: 'condition', message, code }]);

/**
 * The checks a condition needs the database for: every segment.<id> it names is a segment of the
 * project, and following those references never leads back to the segment being saved.
 */
export async function checkReferences(em: EntityManager, projectId: string, condition: Condition, selfId?: string): Promise<void> {
  const direct = referencedSegmentIds(condition);
  if (direct.length === 0) return;
  const rows = await query<{ id: string; condition: Condition | null }>(em, 'select id, condition from segments where project_id = ?', [projectId]);
  const byId = new Map(rows.map((r) => [r.id, r.condition]));
  const missing = direct.filter((id) => !byId.has(id));
  if (missing.length > 0) throw conditionError(`Unknown segment: ${missing.join(', ')}`, 'unknown_segment');
  if (!selfId) return;
  const seen = new Set<string>();
  const pending = [...direct];
  for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
    if (id === selfId) throw conditionError('The condition refers back to this segment (directly or through other segments)', 'segment_cycle');
    if (seen.has(id)) continue;
    seen.add(id);
    const next = byId.get(id);
    if (next) pending.push(...referencedSegmentIds(next));
  }
}

export interface CreateSegmentInput {
  name: string;
  description?: string | null;
  type: SegmentType;
  condition?: Condition;
  trackMembership?: boolean;
}

export async function createSegment(em: EntityManager, projectId: string, input: CreateSegmentInput): Promise<SegmentDto> {
  if (input.type === 'DYNAMIC' && !input.condition) throw conditionError('A DYNAMIC segment needs a condition', 'required');
  if (input.type === 'STATIC' && input.condition) {
    throw conditionError('A STATIC segment has no condition: add members with POST /segments/:id/members', 'not_allowed');
  }
  if (input.condition) await checkReferences(em, projectId, input.condition);
  const id = newId('seg');
  const count = input.condition ? await countMembers(em, projectId, { id, type: input.type, condition: input.condition }) : 0;
  const row = await queryOne<SegmentRow>(
    em,
    `insert into segments (id, project_id, name, description, type, condition, track_membership, member_count, member_count_updated_at)
     values (?, ?, ?, ?, ?, ?::jsonb, ?, ?, now()) returning ${SEGMENT_COLUMNS}`,
    [
      id,
      projectId,
      input.name,
      input.description ?? null,
      input.type,
      input.condition ? JSON.stringify(input.condition) : null,
      input.trackMembership ?? false,
      count,
    ],
  );
  return toDto(row!);
}

export interface UpdateSegmentInput {
  name?: string;
  description?: string | null;
  condition?: Condition;
  trackMembership?: boolean;
}

/**
 * A new condition is counted at once. Turning tracking off forgets the tracked membership, so
 * turning it on again starts afresh (the first compute then emits an entry per member).
 */
export async function updateSegment(em: EntityManager, projectId: string, id: string, patch: UpdateSegmentInput): Promise<SegmentDto> {
  return transaction(em, async (tx) => {
    const current = await loadSegmentRow(tx, projectId, id, true);
    if (patch.condition !== undefined) {
      if (current.type === 'STATIC') throw conditionError('A STATIC segment has no condition', 'not_allowed');
      await checkReferences(tx, projectId, patch.condition, id);
    }
    const sets: string[] = ['updated_at = now()'];
    const params: unknown[] = [];
    const set = (column: string, value: unknown) => {
      sets.push(`${column} = ?`);
      params.push(value);
    };
    if (patch.name !== undefined) set('name', patch.name);
    if (patch.description !== undefined) set('description', patch.description);
    if (patch.trackMembership !== undefined) set('track_membership', patch.trackMembership);
    if (patch.condition !== undefined) {
      const count = await countMembers(tx, projectId, { id, type: current.type, condition: patch.condition });
      sets.push('condition = ?::jsonb', 'member_count = ?', 'member_count_updated_at = now()');
      params.push(JSON.stringify(patch.condition), count);
    }
    const row = await queryOne<SegmentRow>(tx, `update segments set ${sets.join(', ')} where id = ? returning ${SEGMENT_COLUMNS}`, [
      ...params,
      id,
    ]);
    if (current.type === 'DYNAMIC' && current.track_membership && patch.trackMembership === false) {
      await query(tx, 'delete from segment_members where segment_id = ?', [id]);
      await query(tx, 'update segments set last_compute = null where id = ?', [id]);
    }
    return toDto(row!);
  });
}

/**
 * Whether a campaign that is scheduled or sending uses the segment. Campaigns arrive with their own
 * migration: until the table exists, none does.
 */
export async function segmentUsedByActiveCampaign(em: EntityManager, segmentId: string): Promise<boolean> {
  const table = await queryOne<{ t: string | null }>(em, `select to_regclass('campaigns')::text as t`);
  if (!table?.t) return false;
  const used = await queryOne(em, `select 1 from campaigns where segment_id = ? and status in ('SCHEDULED','SENDING') limit 1`, [segmentId]);
  return used !== undefined;
}

export async function deleteSegment(em: EntityManager, projectId: string, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    await loadSegmentRow(tx, projectId, id, true);
    if (await segmentUsedByActiveCampaign(tx, id)) {
      throw conflict(
        'The segment is used by a campaign that is scheduled or sending',
        'Cancel the campaign, or wait until it has been sent, then delete the segment.',
      );
    }
    await query(tx, 'delete from segments where id = ?', [id]);
  });
}
