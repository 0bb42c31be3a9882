import type { FieldType } from '../entities/contact-field';
import { type ConditionField, type ConditionFilter, type ConditionValue, coreFieldType, durationMs, isEventOperator, parseConditionField } from './grammar';
import { asBoolean, asNumber, isMissing, parseDate, parseFullIsoDateTime, readPath } from './values';

/**
 * The condition language's in-memory back-end (fields and operators in grammar.ts): one filter
 * `{field, operator, value?, unit?}` evaluated against one contact, for workflow CONDITION steps
 * (docs/design.md, Conditions). sql.ts compiles the same rules to SQL.
 *
 * Fields (those a CONDITION step names; the others of grammar.ts give false here)
 *   contact.email, contact.subscribed   the contact's core fields (typed string / boolean)
 *   data.<path>                         the contact's data, read fresh; a dotted path reaches nested
 *                                       objects (a key that itself contains dots is tried first)
 *   event.<path>                        the execution context (trigger event data merged with the
 *                                       data of awaited events), same path rules
 *   event.<name>                        with triggered / notTriggered / triggeredWithin /
 *                                       triggeredOlderThan: the contact's tracked events of that name
 *
 * Rules (decisions)
 *   - "Missing" is undefined or null. A missing field never matches a comparison operator, so
 *     equals, notEquals, contains, notContains, the orderings, within and olderThan are all false on
 *     it; only notExists is true.
 *   - Strings compare case-insensitively (equals, contains, and the string ordering).
 *   - Arrays: equals / contains match when an element equals the value; notEquals / notContains when
 *     no element does. Orderings and date operators never match an array; objects match nothing but
 *     exists.
 *   - Numbers compare as numbers. The stored value is coerced from a numeric string only when the
 *     project's field type is number; the condition's own value (often typed into a form) is coerced
 *     to a number whenever it is compared with a number.
 *   - Dates compare as dates when the field type is date (YYYY-MM-DD or full ISO date-time on both
 *     sides) or when both sides are full ISO 8601 date-times (with time and Z or an offset).
 *   - Otherwise two strings order by their lower-cased text; mixed types never order. Equality
 *     otherwise compares the text of both sides (so "42" equals 42 and "true" equals true).
 *   - within / olderThan only look at full ISO 8601 date-times: a `YYYY-MM-DD` or `01/31/2024` value
 *     never matches. within = at or after now − duration (so a future date is within); olderThan = strictly before now − duration.
 *   - triggeredWithin: some event at or after now − duration; triggeredOlderThan: some event strictly
 *     before now − duration (the contact has an event that old, whatever came later).
 *   - The event operators on a non-event field, and the other operators' need for a value that is
 *     missing, give false.
 */

export interface ConditionContact {
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
}

export interface ConditionInput {
  contact: ConditionContact;
  /** The execution context: trigger event data merged with awaited events' data. */
  context: Record<string, unknown>;
  condition: ConditionFilter;
  now: Date;
  /** The project's type for a data.* field (contact_fields); contact.* fields have their own. */
  fieldType?: FieldType;
  /** For the triggered* operators: when the contact tracked the named event (any order, may be partial: earliest and latest suffice). */
  eventTimes?: Date[];
}

/** The fields a contact and an execution context hold; timestamps, engagement and segments are for SQL only. */
type InMemoryField = Extract<ConditionField, { kind: 'email' | 'subscribed' | 'data' | 'event' }>;

// ---- Comparison ------------------------------------------------------------------------------------

const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0);

/** Both sides as dates, by the field type's rule; undefined when they are not both dates. */
function bothDates(a: unknown, v: unknown, fieldType: FieldType | undefined): [number, number] | undefined {
  const at = parseDate(a, fieldType);
  const vt = parseDate(v, fieldType);
  return at === undefined || vt === undefined ? undefined : [at, vt];
}

function scalarEquals(a: unknown, v: ConditionValue, fieldType: FieldType | undefined): boolean {
  if (isMissing(a) || typeof a === 'object') return false;
  const an = asNumber(a, fieldType === 'number');
  if (an !== undefined) return asNumber(v, true) === an;
  if (typeof a === 'number') return false; // NaN / Infinity never come from JSON; nothing equals them
  if (typeof a === 'boolean') return asBoolean(v) === a;
  const dates = bothDates(a, v, fieldType);
  if (dates) return dates[0] === dates[1];
  return String(a).toLowerCase() === String(v).toLowerCase();
}

/** -1 / 0 / 1, or undefined when the two can't be ordered. */
function order(a: unknown, v: ConditionValue, fieldType: FieldType | undefined): number | undefined {
  if (isMissing(a) || typeof a === 'object' || typeof a === 'boolean' || typeof v === 'boolean') return undefined;
  if (fieldType === 'date') {
    const dates = bothDates(a, v, 'date');
    return dates && sign(dates[0] - dates[1]);
  }
  if (fieldType === 'number') {
    const an = asNumber(a, true);
    const vn = asNumber(v, true);
    return an === undefined || vn === undefined ? undefined : sign(an - vn);
  }
  const dates = bothDates(a, v, undefined);
  if (dates) return sign(dates[0] - dates[1]);
  if (typeof a === 'number') {
    const vn = asNumber(v, true);
    return vn === undefined || !Number.isFinite(a) ? undefined : sign(a - vn);
  }
  if (typeof a === 'string' && typeof v === 'string') {
    const x = a.toLowerCase();
    const y = v.toLowerCase();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return undefined;
}

function scalarContains(a: unknown, v: ConditionValue): boolean {
  if (typeof a !== 'string' && typeof a !== 'number') return false;
  return String(a).toLowerCase().includes(String(v).toLowerCase());
}

/** The value a field names for this contact and execution (undefined when absent). */
function resolveField(field: InMemoryField, input: Pick<ConditionInput, 'contact' | 'context'>): unknown {
  switch (field.kind) {
    case 'email':
    case 'subscribed':
      return input.contact[field.kind];
    case 'data':
      return readPath(input.contact.data, field.path);
    case 'event':
      return readPath(input.context, field.name);
  }
}

/** Pure: true when the contact meets the condition. See the rules at the top of this file. */
export function evaluateCondition(input: ConditionInput): boolean {
  const { condition } = input;
  const field = parseConditionField(condition.field);
  if (!field || field.kind === 'timestamp' || field.kind === 'engagement' || field.kind === 'segment') return false;
  const operator = condition.operator === 'gt' ? 'greaterThan' : condition.operator === 'lt' ? 'lessThan' : condition.operator;
  const now = input.now.getTime();

  if (isEventOperator(operator)) {
    if (field.kind !== 'event') return false;
    const times = (input.eventTimes ?? []).map((t) => t.getTime()).filter((t) => Number.isFinite(t));
    if (operator === 'triggered') return times.length > 0;
    if (operator === 'notTriggered') return times.length === 0;
    const duration = durationMs(condition);
    if (duration === undefined) return false;
    const cutoff = now - duration;
    return operator === 'triggeredWithin' ? times.some((t) => t >= cutoff) : times.some((t) => t < cutoff);
  }

  const actual = resolveField(field, input);
  if (operator === 'exists') return !isMissing(actual);
  if (operator === 'notExists') return isMissing(actual);
  if (isMissing(actual)) return false;

  if (operator === 'within' || operator === 'olderThan') {
    const at = parseFullIsoDateTime(actual);
    const duration = durationMs(condition);
    if (at === undefined || duration === undefined) return false;
    const cutoff = now - duration;
    return operator === 'within' ? at >= cutoff : at < cutoff;
  }

  const value = condition.value;
  if (value === undefined) return false;
  const fieldType = coreFieldType(field) ?? input.fieldType;

  if (typeof actual === 'object' && !Array.isArray(actual)) return false;
  const elements: unknown[] | undefined = Array.isArray(actual) ? actual : undefined;

  switch (operator) {
    case 'equals':
      return elements ? elements.some((e) => scalarEquals(e, value, fieldType)) : scalarEquals(actual, value, fieldType);
    case 'notEquals':
      return elements ? !elements.some((e) => scalarEquals(e, value, fieldType)) : !scalarEquals(actual, value, fieldType);
    case 'contains':
      return elements ? elements.some((e) => scalarEquals(e, value, fieldType)) : scalarContains(actual, value);
    case 'notContains':
      if (elements) return !elements.some((e) => scalarEquals(e, value, fieldType));
      return (typeof actual === 'string' || typeof actual === 'number') && !scalarContains(actual, value);
    case 'greaterThan':
    case 'lessThan':
    case 'greaterThanOrEqual':
    case 'lessThanOrEqual': {
      if (elements) return false;
      const c = order(actual, value, fieldType);
      if (c === undefined) return false;
      if (operator === 'greaterThan') return c > 0;
      if (operator === 'lessThan') return c < 0;
      if (operator === 'greaterThanOrEqual') return c >= 0;
      return c <= 0;
    }
    default:
      return false;
  }
}
