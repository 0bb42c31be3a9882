import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, notFound } from '../../errors';
import type { JsonValue } from '../entities/contact';
import { recordEventsCtes } from '../record-events';
import { query, queryOne, transaction } from '../sql';
import { loadSegmentRow, memberPredicate, SEGMENT_COLUMNS, type SegmentRow } from './segments';

/**
 * Tracked dynamic segments also keep their membership in segment_members: compute diffs it with
 * the condition, writes the difference and records `segment.<slug>.entry` / `.exit` events, one per
 * contact, in one statement.
 */

/** "VIP Customers!" → "vip-customers" (the product's rule); a name with nothing left gives the id. */
export function segmentSlug(name: string, id: string): string {
  const slug = name
    .toLowerCase()
    .trim()
    .replace(/[^\w\s-]/g, '')
    .replace(/\s+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '');
  return slug || id;
}

export const membershipEventNames = (name: string, id: string) => {
  const slug = segmentSlug(name, id);
  return { entry: `segment.${slug}.entry`, exit: `segment.${slug}.exit` };
};

/** Compute applies to tracked dynamic segments only. */
export async function requireComputable(em: EntityManager, projectId: string, id: string): Promise<void> {
  const segment = await loadSegmentRow(em, projectId, id);
  if (segment.type !== 'DYNAMIC' || !segment.track_membership) {
    throw conflict(
      'Only a DYNAMIC segment with trackMembership can be computed',
      segment.type === 'DYNAMIC' ? 'PATCH the segment with {"trackMembership": true} first, or use /refresh for the count.' : 'Use /refresh for the count of a STATIC segment.',
    );
  }
}

export interface ComputeOutcome {
  added: number;
  removed: number;
  total: number;
  /** Computes from before the trigger outbox: their events' id range, which a child workflow delivers. */
  events?: { names: string[]; firstId: string; lastId: string } | null;
}

/**
 * Diffs the membership of a tracked dynamic segment with its condition and writes the difference:
 * new members, gone members, one entry or exit event each (recorded through the one event path,
 * db/record-events.ts, so they start journeys and wake waits like any event), the count. One
 * statement in one transaction, with the segment locked; the events get consecutive ids (`evt_` +
 * time + a random run prefix + a sequence number), entries before exits. The outcome is kept
 * under `computeId`: a retry of the same compute returns it instead of diffing again.
 */
export async function applySegmentMembership(
  em: EntityManager,
  input: { projectId: string; segmentId: string; computeId: string; now?: Date },
): Promise<ComputeOutcome> {
  return transaction(em, async (tx) => {
    const segment = await queryOne<SegmentRow & { last_compute: { id: string; outcome: ComputeOutcome } | null }>(
      tx,
      `select ${SEGMENT_COLUMNS}, last_compute from segments where project_id = ? and id = ? for update`,
      [input.projectId, input.segmentId],
    );
    if (!segment) throw notFound('segment');
    if (segment.last_compute?.id === input.computeId) return segment.last_compute.outcome;
    if (segment.type !== 'DYNAMIC' || !segment.condition || !segment.track_membership) {
      throw new AppError(409, 'CONFLICT', 'Only a DYNAMIC segment with trackMembership can be computed');
    }
    const where = await memberPredicate(tx, input.projectId, { id: segment.id, condition: segment.condition }, input.now);
    const names = membershipEventNames(segment.name, segment.id);
    const idPrefix = `evt_${Date.now().toString(16).padStart(12, '0')}${randomBytes(4).toString('hex')}`;
    const row = await queryOne<{ added: number; removed: number; total: number }>(
      tx,
      `with matching as materialized (
         select c.id from contacts c where c.project_id = ? and (${where.sql})
       ),
       added as (
         insert into segment_members (segment_id, contact_id) select ?, m.id from matching m
         on conflict do nothing returning contact_id
       ),
       removed as (
         delete from segment_members sm
         where sm.segment_id = ? and not exists (select 1 from matching m where m.id = sm.contact_id)
         returning sm.contact_id
       ),
       changes as (
         select contact_id, ?::text as name, 1 as k from added
         union all
         select contact_id, ?::text as name, 2 as k from removed
       ),
       emitted as (
         select ?::text || lpad(to_hex(row_number() over (order by k, contact_id)), 12, '0') as id, ?::text as project_id, contact_id, name,
           ?::jsonb as data, null::jsonb as context, false as by_journey
         from changes
       ),
       ${recordEventsCtes('emitted')}
       select (select count(*) from added)::int as added, (select count(*) from removed)::int as removed,
              (select count(*) from matching)::int as total`,
      [
        input.projectId,
        ...where.params,
        segment.id,
        segment.id,
        names.entry,
        names.exit,
        idPrefix,
        input.projectId,
        JSON.stringify({ segmentId: segment.id, segmentName: segment.name }),
      ],
    );
    const r = row!;
    const outcome: ComputeOutcome = { added: r.added, removed: r.removed, total: r.total };
    await query(
      tx,
      `update segments set member_count = ?, member_count_updated_at = now(), last_compute = ?::jsonb where id = ?`,
      [r.total, JSON.stringify({ id: input.computeId, outcome }), segment.id],
    );
    return outcome;
  });
}

export interface MembershipEvent {
  id: string;
  contactId: string;
  name: string;
  data: Record<string, JsonValue>;
  createdAt: string;
}

/** A page of the events one compute recorded, after `after` (exclusive), in id order (computes from before the trigger outbox). */
export async function membershipEventsPage(
  em: EntityManager,
  input: { projectId: string; segmentId: string; names: string[]; firstId: string; lastId: string; after: string | null; limit: number },
): Promise<MembershipEvent[]> {
  const rows = await query<{ id: string; contact_id: string; name: string; data: Record<string, JsonValue>; created_at: Date }>(
    em,
    `select e.id, e.contact_id, e.name, e.data, e.created_at from events e
     where e.project_id = ? and e.name = any(?::text[]) and e.id >= ? and e.id <= ? and e.id > ?
       and e.contact_id is not null and e.data->>'segmentId' = ?
     order by e.id limit ?`,
    [input.projectId, input.names, input.firstId, input.lastId, input.after ?? '', input.segmentId, input.limit],
  );
  return rows.map((r) => ({
    id: r.id,
    contactId: r.contact_id,
    name: r.name,
    data: r.data,
    createdAt: new Date(r.created_at).toISOString(),
  }));
}

/** Of these contacts, the ones with a running or waiting workflow execution (they may await an event). */
export async function contactsWithActiveExecutions(em: EntityManager, projectId: string, contactIds: string[]): Promise<Set<string>> {
  if (contactIds.length === 0) return new Set();
  const rows = await query<{ contact_id: string }>(
    em,
    `select distinct contact_id from workflow_executions where project_id = ? and contact_id = any(?::text[]) and status in ('RUNNING','WAITING')`,
    [projectId, contactIds],
  );
  return new Set(rows.map((r) => r.contact_id));
}
