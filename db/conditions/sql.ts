import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { parseFullIsoDateTime } from './evaluate';
import type { FieldType } from '../entities/contact-field';
import { query, queryOne } from '../sql';
import { CONDITION_OPERATORS } from '../journeys/steps';

/**
 * Segment conditions → SQL (contract-decisions "Segments"). A condition is compiled into one
 * predicate over `contacts c`, so counting, listing and diffing a segment are single statements:
 * no contact is ever evaluated row by row in Node.
 *
 * The value rules are those of the workflow CONDITION evaluator (db/conditions/evaluate.ts, see its header),
 * so a segment and a CONDITION step agree on every contact:
 *   - missing (absent or JSON null) matches no comparison, notEquals and notContains included; only
 *     notExists is true on it;
 *   - strings compare case-insensitively; arrays match equals/contains by element; objects match
 *     nothing but exists;
 *   - numbers compare as numbers: a numeric string counts as a number when the project types the
 *     field number (contact_fields), the condition's value whenever it meets a number;
 *   - dates compare as instants when the field is typed date (YYYY-MM-DD or full ISO) or both
 *     sides are full ISO 8601 date-times; within / olderThan look at full ISO date-times only
 *     (within = at or after now − duration, so a future date is within; olderThan = before it);
 *   - triggered* mean "some event of that name" (triggeredOlderThan: some event before the cutoff).
 * The value and the field type are known when compiling, so each filter compiles to the branch
 * that can match, with the value already parsed (a number, an instant) as a bound parameter.
 *
 * Beyond the evaluator's fields (contract: email, subscribed, createdAt, updatedAt, data.<path>,
 * event.<name>, email.<activity>, segment.<id>; contact.email / contact.subscribed are accepted as
 * the CONDITION steps spell them):
 *   - createdAt / updatedAt are date fields whose value is the ISO text the API shows (milliseconds);
 *   - a data.<path> filter on a field the project deleted matches nothing, notExists included
 *     (contact_field_tombstones; a key registered again is a field again). A key never seen follows
 *     the ordinary rules;
 *   - email.<sent|delivered|opened|clicked|bounced|complained> take the event operators: "some email
 *     to the contact reached that state". Until the tracking columns exist this reads emails.status
 *     (opened covers CLICKED, delivered covers OPENED/CLICKED/COMPLAINED) with sent_at for sent and
 *     updated_at as the time of the other states;
 *   - segment.<id> with memberOfSegment / notMemberOfSegment: a static segment's segment_members, a
 *     dynamic segment's own condition compiled in place. A reference back to a segment being
 *     expanded (a cycle) and a segment that does not exist match nothing.
 *
 * Every compiled filter is two-valued (never NULL), so a compiled condition can be negated, and
 * EXISTS subqueries stay at the top level of AND where PostgreSQL turns them into semi-joins.
 */

export const SEGMENT_OPERATORS = [...CONDITION_OPERATORS, 'memberOfSegment', 'notMemberOfSegment'] as const;
export type SegmentOperator = (typeof SEGMENT_OPERATORS)[number];
export const DURATION_UNITS = ['minutes', 'hours', 'days'] as const;
export type DurationUnit = (typeof DURATION_UNITS)[number];

export interface SegmentFilter {
  field: string;
  operator: SegmentOperator;
  value?: string | number | boolean;
  unit?: DurationUnit;
}
export interface SegmentFilterGroup {
  filters: SegmentFilter[];
  conditions?: SegmentConditionGroup;
}
/** Groups combine with `logic`; inside a group the filters and the nested condition all hold (AND). */
export interface SegmentConditionGroup {
  logic: 'AND' | 'OR';
  groups: SegmentFilterGroup[];
}
export type SegmentCondition = SegmentFilter | SegmentConditionGroup;

export const isFilter = (c: SegmentCondition): c is SegmentFilter => 'field' in c;

export const ENGAGEMENT_ACTIVITIES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const;
export type EngagementActivity = (typeof ENGAGEMENT_ACTIVITIES)[number];

export type SegmentField =
  | { kind: 'email' }
  | { kind: 'subscribed' }
  | { kind: 'timestamp'; column: 'created_at' | 'updated_at' }
  | { kind: 'data'; path: string }
  | { kind: 'event'; name: string }
  | { kind: 'engagement'; activity: EngagementActivity }
  | { kind: 'segment'; segmentId: string };

export function parseSegmentField(field: string): SegmentField | null {
  switch (field) {
    case 'email':
    case 'contact.email':
      return { kind: 'email' };
    case 'subscribed':
    case 'contact.subscribed':
      return { kind: 'subscribed' };
    case 'createdAt':
      return { kind: 'timestamp', column: 'created_at' };
    case 'updatedAt':
      return { kind: 'timestamp', column: 'updated_at' };
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

export const EVENT_OPERATORS: readonly SegmentOperator[] = ['triggered', 'notTriggered', 'triggeredWithin', 'triggeredOlderThan'];
export const MEMBERSHIP_OPERATORS: readonly SegmentOperator[] = ['memberOfSegment', 'notMemberOfSegment'];
export const VALUELESS_OPERATORS: readonly SegmentOperator[] = ['exists', 'notExists', 'triggered', 'notTriggered', 'memberOfSegment', 'notMemberOfSegment'];
export const TIMED_OPERATORS: readonly SegmentOperator[] = ['within', 'olderThan', 'triggeredWithin', 'triggeredOlderThan'];

/** The operators a kind of field takes; the others are refused when a segment is saved. */
export function operatorsFor(field: SegmentField): readonly SegmentOperator[] {
  if (field.kind === 'event' || field.kind === 'engagement') return EVENT_OPERATORS;
  if (field.kind === 'segment') return MEMBERSHIP_OPERATORS;
  return SEGMENT_OPERATORS.filter((o) => !EVENT_OPERATORS.includes(o) && !MEMBERSHIP_OPERATORS.includes(o));
}

/** Every filter of a condition, nested ones included. */
export function conditionFilters(condition: SegmentCondition): SegmentFilter[] {
  if (isFilter(condition)) return [condition];
  return condition.groups.flatMap((g) => [...g.filters, ...(g.conditions ? conditionFilters(g.conditions) : [])]);
}

/** Segment ids a condition names directly (segment.<id>). */
export function referencedSegmentIds(condition: SegmentCondition): string[] {
  const ids = new Set<string>();
  for (const f of conditionFilters(condition)) {
    const field = parseSegmentField(f.field);
    if (field?.kind === 'segment') ids.add(field.segmentId);
  }
  return [...ids];
}

// ---- SQL fragments ---------------------------------------------------------------------------------

/** SQL text with its `?` bindings; template literals below never contain a bare `?` of their own. */
export class Sql {
  constructor(
    readonly sql: string,
    readonly params: readonly unknown[],
  ) {}
}

/** Interpolated Sql is inlined; any other value becomes a `?` binding. */
function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  let text = strings[0]!;
  const params: unknown[] = [];
  values.forEach((v, i) => {
    if (v instanceof Sql) {
      text += v.sql;
      params.push(...v.params);
    } else {
      text += '?';
      params.push(v);
    }
    text += strings[i + 1]!;
  });
  return new Sql(text, params);
}

const raw = (text: string) => new Sql(text, []);
const TRUE = raw('true');
const FALSE = raw('false');

function joinSql(parts: Sql[], separator: string): Sql {
  return new Sql(
    parts.map((p) => p.sql).join(separator),
    parts.flatMap((p) => p.params),
  );
}

// ---- Values, as conditions.ts reads them ---------------------------------------------------------------

const NUMERIC = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const UNIT_MS: Record<DurationUnit, number> = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 };

/** conditions.ts asNumber(x, true): the condition's value is read as a number whenever it can be. */
function asNumber(x: unknown): number | undefined {
  if (typeof x === 'number') return Number.isFinite(x) ? x : undefined;
  if (typeof x === 'string' && NUMERIC.test(x.trim())) return Number(x.trim()); // "1e400" is Infinity, as there
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

/** A date field's value: YYYY-MM-DD (UTC midnight) or a full ISO date-time. */
function parseDateValue(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return parseFullIsoDateTime(`${value}T00:00:00Z`);
  return parseFullIsoDateTime(value);
}

/** now − duration in whole milliseconds (ceil: instants are whole milliseconds, so ≥ and < keep their meaning). */
function cutoffMs(filter: SegmentFilter, now: Date): number | undefined {
  if (typeof filter.value !== 'number' || !Number.isFinite(filter.value) || filter.unit === undefined) return undefined;
  const perUnit = UNIT_MS[filter.unit];
  if (perUnit === undefined) return undefined;
  const cutoff = Math.ceil(now.getTime() - filter.value * perUnit);
  return Number.isFinite(cutoff) ? cutoff : undefined;
}

/** A JS number as exact numeric text (the shortest text that reads back as the same double). */
const numeric = (n: number) => sql`${Number.isFinite(n) ? String(n) : n > 0 ? 'Infinity' : '-Infinity'}::numeric`;
/** An instant from epoch milliseconds, exact to the millisecond. */
const instant = (ms: number) => sql`to_timestamp(${ms}::float8 / 1000)`;

/** The YYYY-MM-DD of an instant moved by some days, when it has four digits (else no bound). */
function isoDay(ms: number, days: number): string | undefined {
  const d = new Date(ms + days * 86_400_000);
  const year = d.getUTCFullYear();
  return Number.isFinite(d.getTime()) && year >= 100 && year <= 9999 ? d.toISOString().slice(0, 10) : undefined;
}

/**
 * segment_iso_ms(text) <op> ms, after a cheap test that rules out most texts without parsing: a
 * valid value's first ten characters are its local date, at most a day from its instant (offsets
 * are under 24 hours), and dates of four-digit years order as text. NULL when the text is no date.
 */
function isoCompare(text: Sql, dateOnlyToo: boolean, op: '>=' | '>' | '<' | '<=' | '=', ms: number): Sql {
  const parts: Sql[] = [];
  const low = op === '<' || op === '<=' ? undefined : isoDay(ms, -1);
  const high = op === '>' || op === '>=' ? undefined : isoDay(ms, 1);
  if (low) parts.push(sql`left(${text}, 10) collate "C" >= ${low}::text`);
  if (high) parts.push(sql`left(${text}, 10) collate "C" <= ${high}::text`);
  parts.push(sql`segment_iso_ms(${text}, ${raw(String(dateOnlyToo))}) ${raw(op)} ${numeric(ms)}`);
  return sql`(${joinSql(parts, ' and ')})`;
}

const COMPARISON: Partial<Record<SegmentOperator, '>' | '<' | '>=' | '<='>> = {
  greaterThan: '>',
  gt: '>',
  lessThan: '<',
  lt: '<',
  greaterThanOrEqual: '>=',
  lessThanOrEqual: '<=',
};

// ---- Compilation -----------------------------------------------------------------------------------

export interface SegmentDefinition {
  type: 'DYNAMIC' | 'STATIC';
  condition: SegmentCondition | null;
}

export interface CompileContext {
  /** "now" for within / olderThan / triggeredWithin / triggeredOlderThan. */
  now: Date;
  /** The project's registered custom fields and their types (contact_fields). */
  fieldTypes: ReadonlyMap<string, FieldType>;
  /** Custom fields the project deleted and has not seen again. */
  deletedFields: ReadonlySet<string>;
  /** The project's segments, for segment.<id> filters. */
  segments: ReadonlyMap<string, SegmentDefinition>;
  /** Segments being expanded right now: a reference to one of them is a cycle. */
  expanding?: ReadonlySet<string>;
  /**
   * The numbers of event names (event_name_ids) the conditions name, null for a name no contact's
   * event has. A name not looked up is compiled to a lookup in events instead.
   */
  eventIds?: ReadonlyMap<string, number | null>;
}

export interface CompiledSql {
  sql: string;
  params: unknown[];
}

/**
 * A predicate over `contacts c` (true or false, never NULL). It does not restrict the project:
 * callers add `c.project_id = ?` (segmentContactsSql does).
 */
export function compileCondition(condition: SegmentCondition, ctx: CompileContext): CompiledSql {
  const compiled = compileNode(condition, ctx);
  return { sql: compiled.sql, params: [...compiled.params] };
}

function compileNode(condition: SegmentCondition, ctx: CompileContext): Sql {
  if (isFilter(condition)) return compileFilter(condition, ctx);
  const groups = condition.groups.map((group) => {
    const parts = [...group.filters.map((f) => compileFilter(f, ctx)), ...(group.conditions ? [compileNode(group.conditions, ctx)] : [])];
    return parts.length === 0 ? TRUE : joinSql(parts.map((p) => sql`(${p})`), ' and ');
  });
  if (groups.length === 0) return condition.logic === 'AND' ? TRUE : FALSE;
  return joinSql(groups.map((g) => sql`(${g})`), condition.logic === 'OR' ? ' or ' : ' and ');
}

function compileFilter(filter: SegmentFilter, ctx: CompileContext): Sql {
  const field = parseSegmentField(filter.field);
  if (!field || !operatorsFor(field).includes(filter.operator)) return FALSE;
  switch (field.kind) {
    case 'email':
      return emailFilter(filter, ctx);
    case 'subscribed':
      return subscribedFilter(filter);
    case 'timestamp':
      return timestampFilter(raw(`c.${field.column}`), filter, ctx);
    case 'data':
      return dataFilter(field.path, filter, ctx);
    case 'event':
      return eventFilter(field.name, filter, ctx);
    case 'engagement':
      return engagementFilter(field.activity, filter, ctx);
    case 'segment':
      return membershipFilter(field.segmentId, filter, ctx);
  }
}

/** c.email is stored lower-case and is never missing. */
function emailFilter(filter: SegmentFilter, _ctx: CompileContext): Sql {
  const { operator, value } = filter;
  if (operator === 'exists') return TRUE;
  if (operator === 'notExists' || value === undefined) return FALSE;
  const text = sql`lower(${String(value)}::text)`;
  switch (operator) {
    case 'equals':
      return sql`c.email = ${text}`;
    case 'notEquals':
      return sql`c.email <> ${text}`;
    case 'contains':
      return sql`strpos(c.email, ${text}) > 0`;
    case 'notContains':
      return sql`strpos(c.email, ${text}) = 0`;
  }
  const op = COMPARISON[operator];
  // An email is never an ISO date-time: it orders as text, against text only.
  if (op && typeof value === 'string') return sql`c.email collate "C" ${raw(op)} ${text} collate "C"`;
  return FALSE; // within / olderThan (not a date), orderings against a number or a boolean
}

/** A boolean that is never missing: only equality means anything. */
function subscribedFilter(filter: SegmentFilter): Sql {
  const { operator, value } = filter;
  if (operator === 'exists') return TRUE;
  if ((operator !== 'equals' && operator !== 'notEquals') || value === undefined) return FALSE;
  const wanted = asBoolean(value);
  if (wanted === undefined) return operator === 'equals' ? FALSE : TRUE; // nothing equals "maybe"
  return raw(operator === 'equals' ? `c.subscribed = ${wanted}` : `c.subscribed <> ${wanted}`);
}

/**
 * created_at / updated_at: a date field whose value is the millisecond ISO text the API shows.
 * Comparisons become ranges on the column (indexable), truncation to milliseconds included.
 */
function timestampFilter(column: Sql, filter: SegmentFilter, ctx: CompileContext): Sql {
  const { operator, value } = filter;
  if (operator === 'exists') return TRUE;
  if (operator === 'notExists') return FALSE;
  if (operator === 'within' || operator === 'olderThan') {
    const cutoff = cutoffMs(filter, ctx.now);
    if (cutoff === undefined) return FALSE;
    return sql`${column} ${raw(operator === 'within' ? '>=' : '<')} ${instant(cutoff)}`;
  }
  if (value === undefined) return FALSE;
  if (operator === 'contains' || operator === 'notContains') {
    const iso = sql`lower(to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;
    return sql`strpos(${iso}, lower(${String(value)}::text)) ${raw(operator === 'contains' ? '>' : '=')} 0`;
  }
  const at = parseDateValue(value);
  if (at === undefined) return operator === 'notEquals' ? TRUE : FALSE;
  const from = instant(at);
  const next = instant(at + 1); // the first instant of the next millisecond
  switch (operator) {
    case 'equals':
      return sql`(${column} >= ${from} and ${column} < ${next})`;
    case 'notEquals':
      return sql`(${column} < ${from} or ${column} >= ${next})`;
    case 'greaterThan':
    case 'gt':
      return sql`${column} >= ${next}`;
    case 'greaterThanOrEqual':
      return sql`${column} >= ${from}`;
    case 'lessThan':
    case 'lt':
      return sql`${column} < ${from}`;
    case 'lessThanOrEqual':
      return sql`${column} < ${next}`;
    default:
      return FALSE;
  }
}

/**
 * The ways conditions.ts readPath may find a dotted path, in its order: at each level the longest
 * key made of the next segments first. Each is a key list for `#>`, which also indexes arrays.
 */
function keyPaths(segments: string[]): string[][] {
  if (segments.length === 0) return [[]];
  const out: string[][] = [];
  for (let n = segments.length; n >= 1; n--) {
    const key = segments.slice(0, n).join('.');
    for (const rest of keyPaths(segments.slice(n))) out.push([key, ...rest]);
  }
  return out;
}

/** Longest data path a filter may name (2^(n-1) ways to read it). */
export const MAX_DATA_PATH_SEGMENTS = 8;

interface DataValue {
  /** The jsonb value (SQL NULL when absent). */
  json: Sql;
  /** Its text (for a string, the string itself). */
  text: Sql;
  /** A single top-level key: `data ? key` can use the GIN index. */
  topKey?: string;
}

function dataValue(path: string): DataValue {
  const segments = path.split('.');
  if (segments.length === 1) {
    return { json: sql`(c.data -> ${path}::text)`, text: sql`(c.data ->> ${path}::text)`, topKey: path };
  }
  const json = sql`coalesce(${joinSql(keyPaths(segments).map((keys) => sql`c.data #> ${keys}::text[]`), ', ')})`;
  return { json, text: sql`(${json} #>> '{}')` };
}

/** The registered field that governs a path: the path itself, or a top-level key it starts with. */
function dataFieldState(path: string, ctx: CompileContext): 'deleted' | 'known' {
  const segments = path.split('.');
  const prefixes = segments.map((_, i) => segments.slice(0, i + 1).join('.'));
  if (prefixes.some((p) => ctx.fieldTypes.has(p))) return 'known';
  return prefixes.some((p) => ctx.deletedFields.has(p)) ? 'deleted' : 'known';
}

function dataFilter(path: string, filter: SegmentFilter, ctx: CompileContext): Sql {
  if (dataFieldState(path, ctx) === 'deleted') return FALSE;
  // Only the path itself has a type: a nested path has none of its own (as in conditions.ts).
  const fieldType = ctx.fieldTypes.get(path);
  const v = dataValue(path);
  const kind = sql`jsonb_typeof(${v.json})`;
  const { operator, value } = filter;

  if (operator === 'exists') {
    return v.topKey !== undefined
      ? sql`(c.data \\? ${v.topKey}::text and jsonb_typeof(c.data -> ${v.topKey}::text) <> 'null')`
      : sql`coalesce(${kind}, 'null') <> 'null'`;
  }
  if (operator === 'notExists') return sql`coalesce(${kind}, 'null') = 'null'`;

  if (operator === 'within' || operator === 'olderThan') {
    const cutoff = cutoffMs(filter, ctx.now);
    if (cutoff === undefined) return FALSE;
    // Only a string can be a date-time, but no need to ask: any other value's text (a number,
    // true, JSON of an array or object) is no ISO date-time either, so segment_iso_ms refuses it.
    return sql`coalesce(${isoCompare(v.text, false, operator === 'within' ? '>=' : '<', cutoff)}, false)`;
  }
  if (value === undefined) return FALSE;

  switch (operator) {
    case 'equals': {
      const fast = plainTextEquals(v, value, fieldType);
      if (fast) return fast;
      const b = scalarEquals(v, value, fieldType);
      return sql`coalesce(case ${kind} when 'array' then ${arrayHas(v, value, fieldType)} when 'number' then ${b.number} when 'boolean' then ${b.boolean} when 'string' then ${b.string} else false end, false)`;
    }
    case 'notEquals': {
      const b = scalarEquals(v, value, fieldType);
      return sql`coalesce(case ${kind} when 'array' then not ${arrayHas(v, value, fieldType)} when 'number' then not ${b.number} when 'boolean' then not ${b.boolean} when 'string' then not ${b.string} else false end, false)`;
    }
    case 'contains':
    case 'notContains': {
      const found = sql`strpos(lower(${v.text}), lower(${String(value)}::text))`;
      const scalar = operator === 'contains' ? sql`${found} > 0` : sql`${found} = 0`;
      const inArray = arrayHas(v, value, fieldType);
      return sql`coalesce(case ${kind} when 'array' then ${operator === 'contains' ? inArray : sql`not ${inArray}`} when 'string' then ${scalar} when 'number' then ${scalar} else false end, false)`;
    }
  }
  const op = COMPARISON[operator];
  if (!op) return FALSE; // an event or membership operator on a data field
  return sql`coalesce(${ordering(v, kind, op, value, fieldType)}, false)`;
}

/** The value as conditions.ts scalarEquals reads it against each kind of stored value. */
function wanted(value: string | number | boolean, fieldType: FieldType | undefined) {
  return {
    number: asNumber(value),
    boolean: asBoolean(value),
    // Both sides dates (by the field type's rule): compared as instants. A text equal to a date
    // value is itself a date (the rules ignore case only in T and Z), so then only instants remain.
    at: typeof value === 'string' ? (fieldType === 'date' ? parseDateValue(value) : parseFullIsoDateTime(value)) : undefined,
    text: String(value),
  };
}

/**
 * conditions.ts scalarEquals, one branch per JSON type of the stored value (each two-valued when
 * the value has that type).
 */
function scalarEquals(v: DataValue, value: string | number | boolean, fieldType: FieldType | undefined): { number: Sql; boolean: Sql; string: Sql } {
  const w = wanted(value, fieldType);
  const textBranch =
    w.at !== undefined
      ? sql`coalesce(${isoCompare(v.text, fieldType === 'date', '=', w.at)}, false)`
      : sql`lower(${v.text}) = lower(${w.text}::text)`;
  return {
    number: w.number === undefined ? FALSE : sql`(${v.json})::numeric = ${numeric(w.number)}`,
    boolean: w.boolean === undefined ? FALSE : sql`(${v.json})::boolean = ${raw(String(w.boolean))}`,
    // A number-typed field reads a numeric string as its number.
    string:
      fieldType === 'number'
        ? sql`case when segment_num_coerce(${v.json}) is null then ${textBranch} else ${
            w.number === undefined ? FALSE : sql`segment_num_coerce(${v.json}) = ${numeric(w.number)}`
          } end`
        : textBranch,
  };
}

/** Some element of an array value equals the value (segment_array_has, see the migration). */
function arrayHas(v: DataValue, value: string | number | boolean, fieldType: FieldType | undefined): Sql {
  const w = wanted(value, fieldType);
  const num = w.number === undefined ? null : Number.isFinite(w.number) ? String(w.number) : w.number > 0 ? 'Infinity' : '-Infinity';
  return sql`segment_array_has(${v.json}, ${num}::numeric, ${w.boolean ?? null}::boolean, lower(${w.text}::text), ${
    w.at === undefined ? null : String(w.at)
  }::numeric, ${raw(String(fieldType === 'date'))}, ${raw(String(fieldType === 'number'))})`;
}

/**
 * equals on a top-level key with a value that is only text (not a number, a boolean or a date by
 * the field's rule, not JSON-looking): then the stored value's text equals it exactly when a
 * string does, since numbers, booleans, arrays and objects never print as such a text. One key
 * lookup per contact instead of a CASE over the JSON type; arrays are found by containment.
 */
function plainTextEquals(v: DataValue, value: string | number | boolean, fieldType: FieldType | undefined): Sql | null {
  const w = wanted(value, fieldType);
  if (v.topKey === undefined || typeof value !== 'string' || w.number !== undefined || w.boolean !== undefined || w.at !== undefined) return null;
  if (value.startsWith('[') || value.startsWith('{')) return null;
  // Lowering never shortens a text (in characters), so a longer one cannot match: lower(), the
  // costly part, runs only on texts as short as the value. An array's text starts with "[" (a
  // cheaper test than containment; a string that does is no array to segment_array_has).
  return sql`(coalesce(length(${v.text}) <= length(lower(${value}::text)) and lower(${v.text}) = lower(${value}::text), false) or coalesce(${v.text} like '[%' and ${arrayHas(v, value, fieldType)}, false))`;
}

/** conditions.ts order() compared with op; NULL or false when the two don't order. */
function ordering(v: DataValue, kind: Sql, op: '>' | '<' | '>=' | '<=', value: string | number | boolean, fieldType: FieldType | undefined): Sql {
  if (typeof value === 'boolean') return FALSE;
  if (fieldType === 'date') {
    const at = parseDateValue(value);
    if (at === undefined) return FALSE;
    return sql`case when ${kind} = 'string' then ${isoCompare(v.text, true, op, at)} end`;
  }
  const wantedNumber = asNumber(value);
  if (fieldType === 'number') {
    if (wantedNumber === undefined) return FALSE;
    const coerced = sql`segment_num_coerce(${v.json}) ${raw(op)} ${numeric(wantedNumber)}`;
    if (v.topKey === undefined || !Number.isFinite(wantedNumber)) return coerced;
    // A JSON number by one jsonpath test, which copies nothing out of the document (a third less
    // per contact than the coercion); the coercion then sees only what that test left: numeric
    // strings, and the values it rejects anyway. Strict: an array is not unwrapped.
    const path = `strict $.${JSON.stringify(v.topKey)} ${op} $n`;
    return sql`(coalesce(jsonb_path_match(c.data, ${path}::jsonpath, ${JSON.stringify({ n: wantedNumber })}::jsonb, true), false) or ${coerced})`;
  }
  const numberBranch = wantedNumber === undefined ? FALSE : sql`(${v.json})::numeric ${raw(op)} ${numeric(wantedNumber)}`;
  const textOrder = typeof value === 'string' ? sql`lower(${v.text}) collate "C" ${raw(op)} lower(${value}::text) collate "C"` : FALSE;
  const at = parseFullIsoDateTime(value);
  // Two full ISO date-times order as instants, anything else as text. A text without "T" at 11
  // is no date-time: it goes straight to the text order, unparsed.
  const stringBranch =
    at === undefined
      ? textOrder
      : sql`case when substr(${v.text}, 11, 1) in ('T', 't') then coalesce(segment_iso_ms(${v.text}, false) ${raw(op)} ${numeric(at)}, ${textOrder}) else ${textOrder} end`;
  return sql`case ${kind} when 'number' then ${numberBranch} when 'string' then ${stringBranch} else false end`;
}

/**
 * The contact's tracked events of that name (events of any origin: tracked or emitted). Whether it
 * has any is contacts.event_ids (see migration 20261127000000): a column test, so under OR it costs
 * no lookup per contact. A time bound still reads events.
 */
function eventFilter(name: string, filter: SegmentFilter, ctx: CompileContext): Sql {
  const known = ctx.eventIds?.has(name);
  const id = ctx.eventIds?.get(name);
  const some = known
    ? id === null || id === undefined
      ? FALSE
      : sql`c.event_ids @> array[${id}::int]`
    : sql`exists (select 1 from events e where e.contact_id = c.id and e.project_id = c.project_id and e.name = ${name}::text)`;
  switch (filter.operator) {
    case 'triggered':
      return some;
    case 'notTriggered':
      return sql`not ${some}`;
    case 'triggeredWithin':
    case 'triggeredOlderThan': {
      const cutoff = cutoffMs(filter, ctx.now);
      // Not behind the event_ids test: alone, this is a semi-join from the name's events in the
      // time window (events_name_time), which that test would turn into a scan of every contact.
      if (cutoff === undefined || some === FALSE) return FALSE;
      return sql`exists (select 1 from events e where e.contact_id = c.id and e.project_id = c.project_id and e.name = ${name}::text and e.created_at ${raw(
        filter.operator === 'triggeredWithin' ? '>=' : '<',
      )} ${instant(cutoff)})`;
    }
    default:
      return FALSE;
  }
}

/**
 * Email engagement from emails.status and sent_at (see the header). When the tracking migration
 * adds per-state timestamps, the state test becomes `<state>_at is not null` and the time that column.
 */
const ENGAGEMENT: Record<EngagementActivity, { reached: string; at: string }> = {
  sent: { reached: 'm.sent_at is not null', at: 'm.sent_at' },
  delivered: { reached: `m.status in ('DELIVERED','OPENED','CLICKED','COMPLAINED')`, at: 'm.updated_at' },
  opened: { reached: `m.status in ('OPENED','CLICKED')`, at: 'm.updated_at' },
  clicked: { reached: `m.status = 'CLICKED'`, at: 'm.updated_at' },
  bounced: { reached: `m.status = 'BOUNCED'`, at: 'm.updated_at' },
  complained: { reached: `m.status = 'COMPLAINED'`, at: 'm.updated_at' },
};

function engagementFilter(activity: EngagementActivity, filter: SegmentFilter, ctx: CompileContext): Sql {
  const state = ENGAGEMENT[activity];
  const base = sql`select 1 from emails m where m.contact_id = c.id and m.project_id = c.project_id and ${raw(state.reached)}`;
  switch (filter.operator) {
    case 'triggered':
      return sql`exists (${base})`;
    case 'notTriggered':
      return sql`not exists (${base})`;
    case 'triggeredWithin':
    case 'triggeredOlderThan': {
      const cutoff = cutoffMs(filter, ctx.now);
      if (cutoff === undefined) return FALSE;
      return sql`exists (${base} and ${raw(state.at)} ${raw(filter.operator === 'triggeredWithin' ? '>=' : '<')} ${instant(cutoff)})`;
    }
    default:
      return FALSE;
  }
}

function membershipFilter(segmentId: string, filter: SegmentFilter, ctx: CompileContext): Sql {
  const segment = ctx.segments.get(segmentId);
  if (!segment || ctx.expanding?.has(segmentId)) return FALSE;
  const member =
    segment.type === 'STATIC' || !segment.condition
      ? sql`exists (select 1 from segment_members sm where sm.segment_id = ${segmentId}::text and sm.contact_id = c.id)`
      : compileNode(segment.condition, { ...ctx, expanding: new Set([...(ctx.expanding ?? []), segmentId]) });
  return filter.operator === 'memberOfSegment' ? sql`(${member})` : sql`not (${member})`;
}

// ---- Loading ---------------------------------------------------------------------------------------

/**
 * What compiling needs from the database, in three small queries: the project's field types and
 * deleted fields, and (only when a condition names a segment) its segments.
 */
export async function loadCompileContext(
  em: EntityManager,
  projectId: string,
  conditions: SegmentCondition[],
  now: Date = new Date(),
): Promise<CompileContext> {
  const needsSegments = conditions.some((c) => referencedSegmentIds(c).length > 0);
  const [fields, deleted, segments, eventIds] = await Promise.all([
    query<{ key: string; type: FieldType }>(em, 'select key, type from contact_fields where project_id = ?', [projectId]),
    query<{ key: string }>(em, 'select key from contact_field_tombstones where project_id = ?', [projectId]),
    needsSegments
      ? query<{ id: string; type: 'DYNAMIC' | 'STATIC'; condition: SegmentCondition | null }>(
          em,
          'select id, type, condition from segments where project_id = ?',
          [projectId],
        )
      : Promise.resolve([]),
    loadEventIds(em, projectId, conditions, needsSegments),
  ]);
  return {
    now,
    fieldTypes: new Map(fields.map((f) => [f.key, f.type])),
    deletedFields: new Set(deleted.map((d) => d.key)),
    segments: new Map(segments.map((s) => [s.id, { type: s.type, condition: s.condition }])),
    eventIds,
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
async function loadEventIds(em: EntityManager, projectId: string, conditions: SegmentCondition[], everyName: boolean): Promise<Map<string, number | null>> {
  const names = new Set<string>();
  for (const c of conditions) {
    for (const f of conditionFilters(c)) {
      const field = parseSegmentField(f.field);
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

/**
 * `select c.id …` of the members of a segment, for use as a subquery or a cursor source (campaign
 * audiences): a static segment's members, a dynamic segment's contacts matching its condition now.
 */
export async function segmentContactsSql(em: EntityManager, projectId: string, segmentId: string): Promise<CompiledSql> {
  const segment = await queryOne<{ type: 'DYNAMIC' | 'STATIC'; condition: SegmentCondition | null }>(
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
