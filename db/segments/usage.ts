import type { EntityManager } from '@mikro-orm/postgresql';
import { parseFieldName } from '../contacts/fields';
import { type Condition, conditionFilters } from '../conditions/grammar';
import { query } from '../sql';

/** Which segments filter on a contact field or an event (the field and event usage lookups). */

export type SegmentRef = { id: string; name: string };

async function segmentsWhere(em: EntityManager, projectId: string, matches: (field: string) => boolean): Promise<SegmentRef[]> {
  const rows = await query<{ id: string; name: string; condition: Condition }>(
    em,
    'select id, name, condition from segments where project_id = ? and condition is not null order by id',
    [projectId],
  );
  return rows.filter((r) => conditionFilters(r.condition).some((f) => matches(f.field))).map((r) => ({ id: r.id, name: r.name }));
}

/** The names a filter may use for a contact field: `data.<key>` (or a path below it), or a standard field. */
export function fieldMatcher(field: string): { segment: (f: string) => boolean; conditionFields: string[]; conditionPrefix?: string; name: string } {
  const parsed = parseFieldName(field);
  if (parsed.kind === 'custom') {
    const name = `data.${parsed.key}`;
    return { name, segment: (f) => f === name || f.startsWith(`${name}.`), conditionFields: [name], conditionPrefix: `${name}.` };
  }
  const standard = parsed.field;
  const aliases = standard === 'email' || standard === 'subscribed' ? [standard, `contact.${standard}`] : [standard];
  return {
    name: standard,
    segment: (f) => aliases.includes(f),
    conditionFields: aliases.filter((a) => a.startsWith('contact.')),
  };
}

/** Segments with a filter on the field (custom fields by `data.<key>` or a path below it). */
export async function segmentsUsingField(em: EntityManager, projectId: string, field: string): Promise<SegmentRef[]> {
  return segmentsWhere(em, projectId, fieldMatcher(field).segment);
}

/** Segments with a filter on `event.<name>`. */
export async function segmentsUsingEvent(em: EntityManager, projectId: string, eventName: string): Promise<SegmentRef[]> {
  return segmentsWhere(em, projectId, (f) => f === `event.${eventName}`);
}
