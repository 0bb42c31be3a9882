import type { EntityManager } from '@mikro-orm/postgresql';
import type { FieldType } from '../entities/contact-field';
import { queryOne } from '../sql';
import type { StepConfigs } from '../journeys/steps';

/**
 * Workflow CONDITION steps (contract-decisions "Workflows" and "Segments"): one filter
 * `{field, operator, value?, unit?}` evaluated against one contact, in memory.
 *
 * Fields
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
 *     it; only notExists is true (contract: "Missing fields never match comparison operators").
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
 *     never matches. within = at or after now − duration (a future date is within, as in the product
 *     the contract follows); olderThan = strictly before now − duration.
 *   - triggeredWithin: some event at or after now − duration; triggeredOlderThan: some event strictly
 *     before now − duration (the contact has an event that old, whatever came later).
 *   - The event operators on a non-event field, and the other operators' need for a value that is
 *     missing, give false.
 */

export type ConditionConfig = StepConfigs['CONDITION'];
export type ConditionFieldType = FieldType;

export interface ConditionContact {
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
}

export interface ConditionInput {
  contact: ConditionContact;
  /** The execution context: trigger event data merged with awaited events' data. */
  context: Record<string, unknown>;
  condition: ConditionConfig;
  now: Date;
  /** The project's type for a data.* field (contact_fields); contact.* fields have their own. */
  fieldType?: FieldType;
  /** For the triggered* operators: when the contact tracked the named event (any order, may be partial: earliest and latest suffice). */
  eventTimes?: Date[];
}

export type ConditionField =
  | { kind: 'contact'; name: 'email' | 'subscribed' }
  | { kind: 'data'; path: string }
  | { kind: 'event'; path: string };

const EVENT_OPERATORS: ReadonlySet<string> = new Set(['triggered', 'notTriggered', 'triggeredWithin', 'triggeredOlderThan']);
export const isEventOperator = (operator: string) => EVENT_OPERATORS.has(operator);

const UNIT_MS = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 } as const;

export function parseConditionField(field: string): ConditionField | null {
  if (field === 'contact.email') return { kind: 'contact', name: 'email' };
  if (field === 'contact.subscribed') return { kind: 'contact', name: 'subscribed' };
  if (field.startsWith('data.') && field.length > 'data.'.length) return { kind: 'data', path: field.slice('data.'.length) };
  if (field.startsWith('event.') && field.length > 'event.'.length) return { kind: 'event', path: field.slice('event.'.length) };
  return null;
}

/**
 * Reads a dotted path. At each level the longest own key made of the next segments wins, so a key
 * stored with dots in its name ("utm.source") is found as well as nested `{utm: {source}}`; array
 * elements are reached by index ("items.0.sku"). Own properties only: "__proto__" finds nothing.
 */
export function readPath(root: unknown, path: string): unknown {
  return walk(root, path.split('.'));
}

function walk(node: unknown, segments: string[]): unknown {
  if (segments.length === 0) return node;
  if (node === null || typeof node !== 'object') return undefined;
  if (Array.isArray(node)) {
    const head = segments[0]!;
    if (!/^\d+$/.test(head)) return undefined;
    const index = Number(head);
    return index < node.length ? walk(node[index], segments.slice(1)) : undefined;
  }
  for (let n = segments.length; n >= 1; n--) {
    const key = segments.slice(0, n).join('.');
    if (!Object.prototype.hasOwnProperty.call(node, key)) continue;
    const found = walk((node as Record<string, unknown>)[key], segments.slice(n));
    if (found !== undefined) return found;
  }
  return undefined;
}

// ---- Dates -----------------------------------------------------------------------------------------

const FULL_ISO = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;

function utcDay(y: number, m: number, d: number): number | undefined {
  if (m < 1 || m > 12 || d < 1) return undefined;
  const ms = Date.UTC(y, m - 1, d);
  const back = new Date(ms);
  // Date.UTC rolls 2024-02-30 over into March: the day must come back unchanged.
  return back.getUTCFullYear() === y && back.getUTCMonth() === m - 1 && back.getUTCDate() === d ? ms : undefined;
}

/** Milliseconds of a full ISO 8601 date-time (date, time, Z or offset), or undefined. */
export function parseFullIsoDateTime(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = FULL_ISO.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, hh, mi, ss, frac, zulu, sign, oh, om] = m;
  const day = utcDay(Number(y), Number(mo), Number(d));
  const hours = Number(hh);
  const minutes = Number(mi);
  const seconds = ss === undefined ? 0 : Number(ss);
  if (day === undefined || hours > 23 || minutes > 59 || seconds > 59) return undefined;
  const millis = frac === undefined ? 0 : Math.floor(Number(`0.${frac}`) * 1000);
  let offset = 0;
  if (!zulu) {
    const offH = Number(oh);
    const offM = om === undefined ? 0 : Number(om);
    if (offH > 23 || offM > 59) return undefined;
    offset = (sign === '-' ? -1 : 1) * (offH * 60 + offM) * 60_000;
  }
  return day + ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis - offset;
}

/** A date field's values: `YYYY-MM-DD` (UTC midnight) or a full ISO date-time. */
function parseDateValue(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = DATE_ONLY.exec(value);
  if (m) return utcDay(Number(m[1]), Number(m[2]), Number(m[3]));
  return parseFullIsoDateTime(value);
}

// ---- Comparison ------------------------------------------------------------------------------------

type Scalar = string | number | boolean;

const NUMERIC = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

function asNumber(x: unknown, coerceStrings: boolean): number | undefined {
  if (typeof x === 'number') return Number.isFinite(x) ? x : undefined;
  if (coerceStrings && typeof x === 'string' && NUMERIC.test(x.trim())) return Number(x.trim());
  return undefined;
}

function asBoolean(x: unknown): boolean | undefined {
  if (typeof x === 'boolean') return x;
  if (typeof x === 'string') {
    const s = x.trim().toLowerCase();
    if (s === 'true') return true;
    if (s === 'false') return false;
  }
  return undefined;
}

const isMissing = (x: unknown): x is null | undefined => x === undefined || x === null;
const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0);

/** Both sides as dates, by the field type's rule; undefined when they are not both dates. */
function bothDates(a: unknown, v: unknown, fieldType: FieldType | undefined): [number, number] | undefined {
  const parse = fieldType === 'date' ? parseDateValue : parseFullIsoDateTime;
  const at = parse(a);
  const vt = parse(v);
  return at === undefined || vt === undefined ? undefined : [at, vt];
}

function scalarEquals(a: unknown, v: Scalar, fieldType: FieldType | undefined): boolean {
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
function order(a: unknown, v: Scalar, fieldType: FieldType | undefined): number | undefined {
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

function scalarContains(a: unknown, v: Scalar): boolean {
  if (typeof a !== 'string' && typeof a !== 'number') return false;
  return String(a).toLowerCase().includes(String(v).toLowerCase());
}

function durationMs(condition: ConditionConfig): number | undefined {
  if (typeof condition.value !== 'number' || !Number.isFinite(condition.value) || condition.unit === undefined) return undefined;
  const perUnit = UNIT_MS[condition.unit];
  return perUnit === undefined ? undefined : condition.value * perUnit;
}

const CONTACT_FIELD_TYPES = { email: 'string', subscribed: 'boolean' } as const;

/** The value a field names for this contact and execution (undefined when absent). */
export function resolveConditionField(field: ConditionField, input: Pick<ConditionInput, 'contact' | 'context'>): unknown {
  switch (field.kind) {
    case 'contact':
      return input.contact[field.name];
    case 'data':
      return readPath(input.contact.data, field.path);
    case 'event':
      return readPath(input.context, field.path);
  }
}

/** Pure: true when the contact meets the condition. See the rules at the top of this file. */
export function evaluateCondition(input: ConditionInput): boolean {
  const { condition } = input;
  const field = parseConditionField(condition.field);
  if (!field) return false;
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

  const actual = resolveConditionField(field, input);
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
  const fieldType: FieldType | undefined = field.kind === 'contact' ? CONTACT_FIELD_TYPES[field.name] : input.fieldType;

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

// ---- Loading ---------------------------------------------------------------------------------------

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
  condition: ConditionConfig,
): Promise<ConditionFacts | null> {
  const field = parseConditionField(condition.field);
  const typeKey = field?.kind === 'data' ? field.path : null;
  const eventName = field?.kind === 'event' && isEventOperator(condition.operator) ? field.path : null;
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
