import type { EntityManager } from '@mikro-orm/postgresql';
import { loadReadySlots } from './field-slots';
import type { FieldType } from '../entities/contact-field';
import { query, together } from '../sql';
import { type Condition, conditionFilters, parseConditionField, referencedSegmentIds } from './grammar';
import type { CompileContext } from './sql';

/**
 * What compiling needs from the database (sql.ts CompileContext), in a few small queries: the
 * project's field types, deleted fields and ready slots, the numbers of the event names the conditions name, and
 * (only when a condition names a segment) its segments.
 */
export async function loadCompileContext(
  em: EntityManager,
  projectId: string,
  conditions: Condition[],
  now: Date = new Date(),
): Promise<CompileContext> {
  const needsSegments = conditions.some((c) => referencedSegmentIds(c).length > 0);
  const [fields, deleted, segments, eventIds, slots] = await together(
    em,
    () => query<{ key: string; type: FieldType }>(em, 'select key, type from contact_fields where project_id = ?', [projectId]),
    () => query<{ key: string }>(em, 'select key from contact_field_tombstones where project_id = ?', [projectId]),
    () =>
      needsSegments
        ? query<{ id: string; type: 'DYNAMIC' | 'STATIC'; condition: Condition | null }>(em, 'select id, type, condition from segments where project_id = ?', [
            projectId,
          ])
        : Promise.resolve([]),
    () => loadEventIds(em, projectId, conditions, needsSegments),
    () => loadReadySlots(em, projectId),
  );
  return {
    now,
    fieldTypes: new Map(fields.map((f) => [f.key, f.type])),
    deletedFields: new Set(deleted.map((d) => d.key)),
    segments: new Map(segments.map((s) => [s.id, { type: s.type, condition: s.condition }])),
    eventIds,
    slots,
  };
}

/**
 * Whether contacts.event_ids covers an event name: not the entry / exit events of tracked segments
 * (segment.<slug>.entry|exit), whose names are one pair per segment and whose first compute emits
 * one per member, so each would write every member's row once more. The trigger of migration
 * 20261127000000 leaves out the same names.
 */
export const summarizedEventName = (name: string) => !name.startsWith('segment.');

/**
 * The event names the conditions name, with their numbers. Conditions that name segments may reach
 * names through them (a dynamic segment is compiled in place), so then every name of the project.
 */
async function loadEventIds(em: EntityManager, projectId: string, conditions: Condition[], everyName: boolean): Promise<Map<string, number | null>> {
  const names = new Set<string>();
  for (const c of conditions) {
    for (const f of conditionFilters(c)) {
      const field = parseConditionField(f.field);
      if (field?.kind === 'event' && summarizedEventName(field.name)) names.add(field.name);
    }
  }
  if (names.size === 0 && !everyName) return new Map();
  const rows = await query<{ name: string; id: number }>(
    em,
    everyName ? 'select name, id from event_name_ids where project_id = ?' : 'select name, id from event_name_ids where project_id = ? and name = any(?::text[])',
    everyName ? [projectId] : [projectId, [...names]],
  );
  const ids = new Map<string, number | null>([...names].map((n) => [n, null]));
  for (const r of rows) ids.set(r.name, r.id);
  return ids;
}
