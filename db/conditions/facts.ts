import type { EntityManager } from '@mikro-orm/postgresql';
import type { FieldType } from '../entities/contact-field';
import { queryOne } from '../sql';
import type { ConditionContact } from './evaluate';
import { type ConditionFilter, isEventOperator, parseConditionField } from './grammar';

export interface ConditionFacts {
  contact: ConditionContact;
  fieldType?: FieldType;
  eventTimes?: Date[];
}

/**
 * Everything evaluateCondition needs from the database, in one round trip: the contact as it is
 * now, the project's type of a data.* key (contact_fields; a nested path has no registered type of
 * its own), and for the event operators the first and last time the contact tracked that event
 * (enough for "ever", "within" and "older than"). Null when the contact does not exist in the project.
 */
export async function loadConditionFacts(
  em: EntityManager,
  projectId: string,
  contactId: string,
  condition: ConditionFilter,
): Promise<ConditionFacts | null> {
  const field = parseConditionField(condition.field);
  const typeKey = field?.kind === 'data' ? field.path : null;
  const eventName = field?.kind === 'event' && isEventOperator(condition.operator) ? field.name : null;
  const row = await queryOne<{
    email: string;
    subscribed: boolean;
    data: Record<string, unknown>;
    field_type: FieldType | null;
    first_at: Date | null;
    last_at: Date | null;
  }>(
    em,
    `select c.email, c.subscribed, c.data,
       (select f.type from contact_fields f where f.project_id = c.project_id and f.key = ?::text) as field_type,
       ev.first_at, ev.last_at
     from contacts c
     left join lateral (
       select min(e.created_at) as first_at, max(e.created_at) as last_at
       from events e
       where ?::text is not null and e.project_id = c.project_id and e.contact_id = c.id and e.name = ?::text
     ) ev on true
     where c.project_id = ? and c.id = ?`,
    [typeKey, eventName, eventName, projectId, contactId],
  );
  if (!row) return null;
  const facts: ConditionFacts = { contact: { email: row.email, subscribed: row.subscribed, data: row.data ?? {} } };
  if (row.field_type) facts.fieldType = row.field_type;
  if (eventName !== null) {
    facts.eventTimes = [row.first_at, row.last_at].filter((t): t is Date => t !== null).map((t) => new Date(t));
  }
  return facts;
}
