import type { FieldType } from '../entities/contact-field';

/**
 * The condition language (docs/design.md, Conditions): its fields, operators,
 * duration units and condition trees, for both back-ends. evaluate.ts decides one filter for one
 * contact in memory (journey CONDITION steps); sql.ts compiles a whole condition into one predicate
 * over every contact (segments, and through them campaign audiences). The value rules both follow
 * are in evaluate.ts's header; values.ts reads values for both.
 *
 * Fields
 *   email, subscribed                   the contact's core fields (string / boolean); contact.email and
 *                                       contact.subscribed are the same fields, as CONDITION steps spell them
 *   createdAt, updatedAt                the contact's timestamps, date fields
 *   data.<path>                         the contact's data; a dotted path reaches nested values (values.ts readPath)
 *   event.<name>                        with the event operators: the contact's tracked events of that name;
 *                                       with the others: a path into a journey's execution context (trigger
 *                                       event data merged with the data of awaited events), which a segment has not
 *   email.<activity>                    email engagement (sent, delivered, opened, clicked, bounced, complained),
 *                                       with the event operators
 *   segment.<id>                        membership of another segment
 * A journey CONDITION step names contact.email, contact.subscribed, data.* and event.* only (its
 * schema refuses the others): the in-memory back-end has no timestamps, engagement or segments.
 */

// ---- Operators -------------------------------------------------------------------------------------

/** Every operator. A CONDITION step takes all but the membership ones (it cannot name a segment). */
export const CONDITION_OPERATORS = [
  'equals',
  'notEquals',
  'contains',
  'notContains',
  'greaterThan',
  'gt',
  'lessThan',
  'lt',
  'greaterThanOrEqual',
  'lessThanOrEqual',
  'exists',
  'notExists',
  'within',
  'olderThan',
  'triggered',
  'notTriggered',
  'triggeredWithin',
  'triggeredOlderThan',
  'memberOfSegment',
  'notMemberOfSegment',
] as const;
export type ConditionOperator = (typeof CONDITION_OPERATORS)[number];

export const EVENT_OPERATORS: readonly ConditionOperator[] = ['triggered', 'notTriggered', 'triggeredWithin', 'triggeredOlderThan'];
export const MEMBERSHIP_OPERATORS: readonly ConditionOperator[] = ['memberOfSegment', 'notMemberOfSegment'];
export const VALUELESS_OPERATORS: readonly ConditionOperator[] = ['exists', 'notExists', 'triggered', 'notTriggered', 'memberOfSegment', 'notMemberOfSegment'];
/** Operators whose value is a duration: a number of `unit`s back from now. */
export const TIMED_OPERATORS: readonly ConditionOperator[] = ['within', 'olderThan', 'triggeredWithin', 'triggeredOlderThan'];

export const isEventOperator = (operator: string) => (EVENT_OPERATORS as readonly string[]).includes(operator);

// ---- Units -----------------------------------------------------------------------------------------

export const DURATION_UNITS = ['minutes', 'hours', 'days'] as const;
export type DurationUnit = (typeof DURATION_UNITS)[number];

const UNIT_MS: Record<DurationUnit, number> = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 };

/** A timed operator's duration in milliseconds; undefined without a finite number and a unit. */
export function durationMs(filter: Pick<ConditionFilter, 'value' | 'unit'>): number | undefined {
  if (typeof filter.value !== 'number' || !Number.isFinite(filter.value) || filter.unit === undefined) return undefined;
  const perUnit = UNIT_MS[filter.unit];
  return perUnit === undefined ? undefined : filter.value * perUnit;
}

// ---- Conditions ------------------------------------------------------------------------------------

export type ConditionValue = string | number | boolean;

/** One test of one field. A CONDITION step's config is one filter. */
export interface ConditionFilter {
  field: string;
  operator: ConditionOperator;
  value?: ConditionValue;
  unit?: DurationUnit;
}
export interface ConditionFilterGroup {
  filters: ConditionFilter[];
  conditions?: ConditionGroup;
}
/** Groups combine with `logic`; inside a group the filters and the nested condition all hold (AND). */
export interface ConditionGroup {
  logic: 'AND' | 'OR';
  groups: ConditionFilterGroup[];
}
export type Condition = ConditionFilter | ConditionGroup;

export const isFilter = (c: Condition): c is ConditionFilter => 'field' in c;

/** Every filter of a condition, nested ones included. */
export function conditionFilters(condition: Condition): ConditionFilter[] {
  if (isFilter(condition)) return [condition];
  return condition.groups.flatMap((g) => [...g.filters, ...(g.conditions ? conditionFilters(g.conditions) : [])]);
}

/** Segment ids a condition names directly (segment.<id>). */
export function referencedSegmentIds(condition: Condition): string[] {
  const ids = new Set<string>();
  for (const f of conditionFilters(condition)) {
    const field = parseConditionField(f.field);
    if (field?.kind === 'segment') ids.add(field.segmentId);
  }
  return [...ids];
}

// ---- Fields ----------------------------------------------------------------------------------------

export const ENGAGEMENT_ACTIVITIES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const;
export type EngagementActivity = (typeof ENGAGEMENT_ACTIVITIES)[number];

/** A field name, parsed (see the list at the top). */
export type ConditionField =
  | { kind: 'email' }
  | { kind: 'subscribed' }
  | { kind: 'timestamp'; name: 'createdAt' | 'updatedAt' }
  | { kind: 'data'; path: string }
  | { kind: 'event'; name: string }
  | { kind: 'engagement'; activity: EngagementActivity }
  | { kind: 'segment'; segmentId: string };

/** Longest data path a filter may name (sql.ts reads each of its 2^(n-1) ways). */
export const MAX_DATA_PATH_SEGMENTS = 8;

export function parseConditionField(field: string): ConditionField | null {
  switch (field) {
    case 'email':
    case 'contact.email':
      return { kind: 'email' };
    case 'subscribed':
    case 'contact.subscribed':
      return { kind: 'subscribed' };
    case 'createdAt':
    case 'updatedAt':
      return { kind: 'timestamp', name: field };
  }
  const rest = (prefix: string) => (field.startsWith(prefix) && field.length > prefix.length ? field.slice(prefix.length) : null);
  const data = rest('data.');
  if (data !== null) return { kind: 'data', path: data };
  const event = rest('event.');
  if (event !== null) return { kind: 'event', name: event };
  const activity = rest('email.');
  if (activity !== null) {
    return (ENGAGEMENT_ACTIVITIES as readonly string[]).includes(activity) ? { kind: 'engagement', activity: activity as EngagementActivity } : null;
  }
  const segment = rest('segment.');
  if (segment !== null) return { kind: 'segment', segmentId: segment };
  return null;
}

/** The type of a core field's values; a data.<path> field has the project's type for it (contact_fields). */
export function coreFieldType(field: ConditionField): FieldType | undefined {
  if (field.kind === 'email') return 'string';
  if (field.kind === 'subscribed') return 'boolean';
  if (field.kind === 'timestamp') return 'date';
  return undefined;
}

/**
 * The operators a kind of field takes in a segment, where event.<name> can only mean events (there
 * is no execution context); the others are refused when a segment is saved and compile to false.
 */
export function operatorsFor(field: ConditionField): readonly ConditionOperator[] {
  if (field.kind === 'event' || field.kind === 'engagement') return EVENT_OPERATORS;
  if (field.kind === 'segment') return MEMBERSHIP_OPERATORS;
  return CONDITION_OPERATORS.filter((o) => !EVENT_OPERATORS.includes(o) && !MEMBERSHIP_OPERATORS.includes(o));
}
