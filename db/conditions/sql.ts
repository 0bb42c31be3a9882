import { type FieldSlot, numberKey, SLOT_KIND } from './field-slots';
import type { FieldType } from '../entities/contact-field';
import { type Sql, FALSE, joinSql, raw, sql, TRUE } from './fragments';
import {
  type Condition,
  type ConditionFilter,
  type ConditionOperator,
  type ConditionValue,
  durationMs,
  type EngagementActivity,
  isFilter,
  operatorsFor,
  parseConditionField,
} from './grammar';
import { asBoolean, asNumber, keyPaths, parseDate, parseDateValue, parseFullIsoDateTime } from './values';

/**
 * The condition language's SQL back-end (fields and operators in grammar.ts): segment conditions
 * → SQL (docs/design.md, Conditions and Segments). A condition is compiled into one predicate over
 * `contacts c`, so counting, listing and diffing a segment are single statements: no contact is
 * ever evaluated row by row in Node. What compiling needs from the database is loaded by
 * compile-context.ts.
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
 * Beyond the evaluator's fields (docs/design.md, Conditions: email, subscribed, createdAt, updatedAt, data.<path>,
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

// ---- Values as SQL ---------------------------------------------------------------------------------

/** now − duration in whole milliseconds (ceil: instants are whole milliseconds, so ≥ and < keep their meaning). */
function cutoffMs(filter: ConditionFilter, now: Date): number | undefined {
  const duration = durationMs(filter);
  if (duration === undefined) return undefined;
  const cutoff = Math.ceil(now.getTime() - duration);
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

const COMPARISON: Partial<Record<ConditionOperator, '>' | '<' | '>=' | '<='>> = {
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
  condition: Condition | null;
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
  /** Custom fields whose typed slot column is ready (field-slots.ts). */
  slots?: ReadonlyMap<string, FieldSlot>;
}

export interface CompiledSql {
  sql: string;
  params: unknown[];
}

/**
 * A predicate over `contacts c` (true or false, never NULL). It does not restrict the project:
 * callers add `c.project_id = ?` (segmentPredicate's callers do).
 */
export function compileCondition(condition: Condition, ctx: CompileContext): CompiledSql {
  const compiled = compileNode(condition, ctx);
  return { sql: compiled.sql, params: [...compiled.params] };
}

function compileNode(condition: Condition, ctx: CompileContext): Sql {
  if (isFilter(condition)) return compileFilter(condition, ctx);
  const groups = condition.groups.map((group) => {
    const parts = [...group.filters.map((f) => compileFilter(f, ctx)), ...(group.conditions ? [compileNode(group.conditions, ctx)] : [])];
    return parts.length === 0 ? TRUE : joinSql(parts.map((p) => sql`(${p})`), ' and ');
  });
  if (groups.length === 0) return condition.logic === 'AND' ? TRUE : FALSE;
  return joinSql(groups.map((g) => sql`(${g})`), condition.logic === 'OR' ? ' or ' : ' and ');
}

function compileFilter(filter: ConditionFilter, ctx: CompileContext): Sql {
  const field = parseConditionField(filter.field);
  if (!field || !operatorsFor(field).includes(filter.operator)) return FALSE;
  switch (field.kind) {
    case 'email':
      return emailFilter(filter, ctx);
    case 'subscribed':
      return subscribedFilter(filter);
    case 'timestamp':
      return timestampFilter(raw(field.name === 'createdAt' ? 'c.created_at' : 'c.updated_at'), filter, ctx);
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
function emailFilter(filter: ConditionFilter, _ctx: CompileContext): Sql {
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
function subscribedFilter(filter: ConditionFilter): Sql {
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
function timestampFilter(column: Sql, filter: ConditionFilter, ctx: CompileContext): Sql {
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

function dataFilter(path: string, filter: ConditionFilter, ctx: CompileContext): Sql {
  if (dataFieldState(path, ctx) === 'deleted') return FALSE;
  // Only the path itself has a type: a nested path has none of its own (as in evaluate.ts).
  const fieldType = ctx.fieldTypes.get(path);
  const slotted = slotFilter(path, filter, fieldType, ctx);
  if (slotted) return slotted;
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

/** The value as evaluate.ts scalarEquals reads it against each kind of stored value. */
function wanted(value: ConditionValue, fieldType: FieldType | undefined) {
  return {
    number: asNumber(value, true),
    boolean: asBoolean(value),
    // Both sides dates (by the field type's rule): compared as instants. A text equal to a date
    // value is itself a date (the rules ignore case only in T and Z), so then only instants remain.
    at: parseDate(value, fieldType),
    text: String(value),
  };
}

/**
 * evaluate.ts scalarEquals, one branch per JSON type of the stored value (each two-valued when
 * the value has that type).
 */
function scalarEquals(v: DataValue, value: ConditionValue, fieldType: FieldType | undefined): { number: Sql; boolean: Sql; string: Sql } {
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
function arrayHas(v: DataValue, value: ConditionValue, fieldType: FieldType | undefined): Sql {
  const w = wanted(value, fieldType);
  const num = w.number === undefined ? null : Number.isFinite(w.number) ? String(w.number) : w.number > 0 ? 'Infinity' : '-Infinity';
  return sql`segment_array_has(${v.json}, ${num}::numeric, ${w.boolean ?? null}::boolean, lower(${w.text}::text), ${
    w.at === undefined ? null : String(w.at)
  }::numeric, ${raw(String(fieldType === 'date'))}, ${raw(String(fieldType === 'number'))})`;
}

/**
 * A value that is only text: not a number, a boolean or a date by the field's rule, not
 * JSON-looking. A stored value's text equals it exactly when a string does, since numbers,
 * booleans, arrays and objects never print as such a text.
 */
function isPlainText(value: ConditionValue, fieldType: FieldType | undefined): value is string {
  const w = wanted(value, fieldType);
  if (typeof value !== 'string' || w.number !== undefined || w.boolean !== undefined || w.at !== undefined) return false;
  return !value.startsWith('[') && !value.startsWith('{');
}

/**
 * equals on a top-level key with a plain-text value (isPlainText): one key lookup per contact
 * instead of a CASE over the JSON type; arrays are found by containment.
 */
function plainTextEquals(v: DataValue, value: ConditionValue, fieldType: FieldType | undefined): Sql | null {
  if (v.topKey === undefined || !isPlainText(value, fieldType)) return null;
  // Lowering never shortens a text (in characters), so a longer one cannot match: lower(), the
  // costly part, runs only on texts as short as the value. An array's text starts with "[" (a
  // cheaper test than containment; a string that does is no array to segment_array_has).
  return sql`(coalesce(length(${v.text}) <= length(lower(${value}::text)) and lower(${v.text}) = lower(${value}::text), false) or coalesce(${v.text} like '[%' and ${arrayHas(v, value, fieldType)}, false))`;
}

/**
 * A filter that a ready slot answers by itself, as a plain comparison of its column (two-valued:
 * `and column is not null`), which the slot's btree serves; null when the slot cannot, and the
 * JSON expression follows. Each case is the expression's own rule on what the slot holds:
 *   - text (string fields), equals a plain text: the string lower-cased; only while no contact's
 *     value is a list, which equality would match by element;
 *   - number (number fields), the orderings: segment_num_coerce, as ordering() reads it, compared
 *     as doubles (as the evaluator compares; numeric and double differ only past a double's 17
 *     digits);
 *   - date (date fields), within / olderThan: segment_iso_ms of full ISO date-times, as isoCompare.
 */
function slotFilter(path: string, filter: ConditionFilter, fieldType: FieldType | undefined, ctx: CompileContext): Sql | null {
  const slot = ctx.slots?.get(path);
  if (!slot || fieldType === undefined || SLOT_KIND[fieldType] !== slot.kind) return null;
  const { operator, value } = filter;
  const compare = (op: string, bound: Sql) => sql`(${raw(slot.column)} ${raw(op)} ${bound} and ${raw(slot.column)} is not null)`;
  switch (slot.kind) {
    case 't':
      if (operator !== 'equals' || slot.hasList || value === undefined || !isPlainText(value, fieldType)) return null;
      return compare('=', sql`lower(${value}::text)`);
    case 'n': {
      const op = COMPARISON[operator];
      const n = op && value !== undefined && typeof value !== 'boolean' ? asNumber(value, true) : undefined;
      return op && n !== undefined ? compare(op, sql`${numberKey(n).toString()}::bigint`) : null;
    }
    case 'd': {
      if (operator !== 'within' && operator !== 'olderThan') return null;
      const cutoff = cutoffMs(filter, ctx.now);
      return cutoff === undefined ? null : compare(operator === 'within' ? '>=' : '<', sql`${cutoff}::bigint`);
    }
  }
}

/** evaluate.ts order() compared with op; NULL or false when the two don't order. */
function ordering(v: DataValue, kind: Sql, op: '>' | '<' | '>=' | '<=', value: ConditionValue, fieldType: FieldType | undefined): Sql {
  if (typeof value === 'boolean') return FALSE;
  if (fieldType === 'date') {
    const at = parseDateValue(value);
    if (at === undefined) return FALSE;
    return sql`case when ${kind} = 'string' then ${isoCompare(v.text, true, op, at)} end`;
  }
  const wantedNumber = asNumber(value, true);
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
 * no lookup per contact (`= any`, a third cheaper per contact than `@>`: no index serves either,
 * and the array holds no NULL, so it is two-valued). A time bound still reads events.
 */
function eventFilter(name: string, filter: ConditionFilter, ctx: CompileContext): Sql {
  const known = ctx.eventIds?.has(name);
  const id = ctx.eventIds?.get(name);
  const some = known
    ? id === null || id === undefined
      ? FALSE
      : sql`${id}::int = any(c.event_ids)`
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

function engagementFilter(activity: EngagementActivity, filter: ConditionFilter, ctx: CompileContext): Sql {
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

function membershipFilter(segmentId: string, filter: ConditionFilter, ctx: CompileContext): Sql {
  const segment = ctx.segments.get(segmentId);
  if (!segment || ctx.expanding?.has(segmentId)) return FALSE;
  const member =
    segment.type === 'STATIC' || !segment.condition
      ? sql`exists (select 1 from segment_members sm where sm.segment_id = ${segmentId}::text and sm.contact_id = c.id)`
      : compileNode(segment.condition, { ...ctx, expanding: new Set([...(ctx.expanding ?? []), segmentId]) });
  return filter.operator === 'memberOfSegment' ? sql`(${member})` : sql`not (${member})`;
}
