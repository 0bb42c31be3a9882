/**
 * ConditionBuilder: edits a condition and hands back the exact JSON the API accepts
 * (api/schemas/segments.ts segmentCondition; db/journeys/steps.ts CONDITION config).
 *
 * Props
 *   mode        'segment' (default): a condition tree `{logic: 'AND'|'OR', groups: [{filters, conditions?}]}`
 *               over contact fields (GET /contacts/fields), events (GET /events/names), email activity and
 *               other segments (GET /segments), as segments and campaign audiences use it.
 *               'filter': one filter `{field, operator, value?, unit?}` over the fields of a journey
 *               CONDITION step (GET /workflows/fields: contact.email, contact.subscribed, data.<key>, event.<name>).
 *   value       the condition being edited (controlled): a ConditionGroup or a ConditionFilter, or null for
 *               none yet. In 'segment' mode a lone filter is shown (and handed back) as a one-group condition.
 *   onChange    (next, complete) => void, called on every edit. `next` is always a condition in the API's shape;
 *               while a row is unfinished (no field picked, a value missing) `complete` is false: send it
 *               only when complete is true, or send it anyway and show the service's error.
 *   label       the legend of the builder's fieldset (default 'Condition'); every control is labelled under it.
 *   excludeSegmentId  a segment not to offer as a segment.<id> field (the segment being edited).
 *   disabled    read-only view.
 *
 * Example
 *   const [condition, setCondition] = useState<Condition | null>(null);
 *   const [complete, setComplete] = useState(false);
 *   <ConditionBuilder value={condition} onChange={(c, ok) => { setCondition(c); setComplete(ok); }} />
 *   // a journey CONDITION step:
 *   <ConditionBuilder mode="filter" label="Branch on" value={config} onChange={(f) => setConfig(f as ConditionFilter)} />
 *
 * `emptyCondition(mode)` gives a starting value; `isCompleteCondition(c)` tells whether one is ready to send.
 */
import { useQuery } from '@tanstack/react-query';
import { Fragment, useId } from 'react';
import { useParams } from 'react-router';
import { api } from '../api/client';
import { useContactFields } from '../api/contacts';
import { useEventNames } from '../api/events';
import { useSegments } from '../api/segments';
import './ConditionBuilder.css';

// ---- The condition model (db/conditions/grammar.ts, as the API accepts it) ---------------------------

export type ConditionOperator =
  | 'equals'
  | 'notEquals'
  | 'contains'
  | 'notContains'
  | 'greaterThan'
  | 'gt'
  | 'lessThan'
  | 'lt'
  | 'greaterThanOrEqual'
  | 'lessThanOrEqual'
  | 'exists'
  | 'notExists'
  | 'within'
  | 'olderThan'
  | 'triggered'
  | 'notTriggered'
  | 'triggeredWithin'
  | 'triggeredOlderThan'
  | 'memberOfSegment'
  | 'notMemberOfSegment';
export type DurationUnit = 'minutes' | 'hours' | 'days';
export type ConditionValue = string | number | boolean;

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
export interface ConditionGroup {
  logic: 'AND' | 'OR';
  groups: ConditionFilterGroup[];
}
export type Condition = ConditionFilter | ConditionGroup;

export interface ConditionBuilderProps {
  mode?: 'segment' | 'filter';
  value: Condition | null | undefined;
  onChange: (next: Condition, complete: boolean) => void;
  label?: string;
  excludeSegmentId?: string;
  disabled?: boolean;
}

/** The service's limit on nesting (api/schemas/segments.ts MAX_DEPTH). */
const MAX_DEPTH = 5;

const VALUELESS: ConditionOperator[] = ['exists', 'notExists', 'triggered', 'notTriggered', 'memberOfSegment', 'notMemberOfSegment'];
const TIMED: ConditionOperator[] = ['within', 'olderThan', 'triggeredWithin', 'triggeredOlderThan'];
const ENGAGEMENT = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const;

export const isFilter = (c: Condition): c is ConditionFilter => 'field' in c;

const blankFilter = (): ConditionFilter => ({ field: '', operator: 'equals' });

export function emptyCondition(mode: 'segment' | 'filter' = 'segment'): Condition {
  return mode === 'filter' ? blankFilter() : { logic: 'AND', groups: [{ filters: [blankFilter()] }] };
}

function filterComplete(f: ConditionFilter): boolean {
  if (!f.field || /\.$/.test(f.field)) return false;
  if (VALUELESS.includes(f.operator)) return true;
  if (TIMED.includes(f.operator)) return typeof f.value === 'number' && Number.isFinite(f.value) && f.value >= 0 && f.unit !== undefined;
  return f.value !== undefined && f.value !== '';
}

/** Every filter has a field, and a value (and a unit) where its operator needs one. */
export function isCompleteCondition(c: Condition | null | undefined): boolean {
  if (!c) return false;
  if (isFilter(c)) return filterComplete(c);
  return c.groups.length > 0 && c.groups.every((g) => (g.filters.length > 0 || g.conditions) && g.filters.every(filterComplete) && (!g.conditions || isCompleteCondition(g.conditions)));
}

// ---- Fields and the operators each type takes ---------------------------------------------------------

type FieldKind = 'string' | 'number' | 'boolean' | 'date' | 'event' | 'segment';

interface FieldOption {
  field: string;
  label: string;
  kind: FieldKind;
  section: string;
}

/** The operators offered for a kind of field, in the order they are listed. */
const OPERATORS: Record<FieldKind, ConditionOperator[]> = {
  string: ['equals', 'notEquals', 'contains', 'notContains', 'exists', 'notExists'],
  number: ['equals', 'notEquals', 'greaterThan', 'greaterThanOrEqual', 'lessThan', 'lessThanOrEqual', 'exists', 'notExists'],
  boolean: ['equals', 'notEquals', 'exists', 'notExists'],
  date: ['greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual', 'within', 'olderThan', 'exists', 'notExists'],
  event: ['triggered', 'notTriggered', 'triggeredWithin', 'triggeredOlderThan'],
  segment: ['memberOfSegment', 'notMemberOfSegment'],
};

function operatorLabel(op: ConditionOperator, kind: FieldKind): string {
  const dates = kind === 'date';
  switch (op) {
    case 'equals':
      return 'is';
    case 'notEquals':
      return 'is not';
    case 'contains':
      return 'contains';
    case 'notContains':
      return 'does not contain';
    case 'greaterThan':
    case 'gt':
      return dates ? 'is after' : 'is greater than';
    case 'lessThan':
    case 'lt':
      return dates ? 'is before' : 'is less than';
    case 'greaterThanOrEqual':
      return dates ? 'is on or after' : 'is at least';
    case 'lessThanOrEqual':
      return dates ? 'is on or before' : 'is at most';
    case 'exists':
      return 'is set';
    case 'notExists':
      return 'is not set';
    case 'within':
      return 'is within the last';
    case 'olderThan':
      return 'is more than … ago';
    case 'triggered':
      return 'has happened';
    case 'notTriggered':
      return 'has never happened';
    case 'triggeredWithin':
      return 'happened within the last';
    case 'triggeredOlderThan':
      return 'happened more than … ago';
    case 'memberOfSegment':
      return 'is a member';
    case 'notMemberOfSegment':
      return 'is not a member';
  }
}

const STANDARD_LABELS: Record<string, string> = {
  email: 'Email',
  subscribed: 'Subscribed',
  createdAt: 'Created',
  updatedAt: 'Updated',
  'contact.email': 'Email',
  'contact.subscribed': 'Subscribed',
};

interface JourneyFieldsResponse {
  fields: Array<{ field: string; type: 'string' | 'number' | 'boolean' | 'date' | 'event'; source: 'contact' | 'data' | 'event' }>;
}

/** The fields a condition can name, from the service's lists of the project's fields, events and segments. */
function useFieldOptions(mode: 'segment' | 'filter', excludeSegmentId: string | undefined) {
  const { projectId } = useParams();
  const segmentMode = mode === 'segment';
  const contactFields = useContactFields(projectId ?? '', { enabled: segmentMode });
  const events = useEventNames(projectId ?? '', { enabled: segmentMode });
  const segments = useSegments(projectId ?? '', { enabled: segmentMode });
  const journeyFields = useQuery({
    queryKey: ['workflow-fields', projectId],
    queryFn: () => api<JourneyFieldsResponse>('/workflows/fields'),
    enabled: !segmentMode,
    staleTime: 60_000,
  });

  const options: FieldOption[] = [];
  if (segmentMode) {
    for (const f of contactFields.data ?? []) {
      options.push({
        field: f.field,
        label: f.isCustom ? f.field.replace(/^data\./, '') : (STANDARD_LABELS[f.field] ?? f.field),
        kind: f.type,
        section: f.isCustom ? 'Custom fields' : 'Contact',
      });
    }
    // email.* events are offered as the email activity fields below.
    for (const e of events.data ?? []) {
      if (e.name.startsWith('email.')) continue;
      options.push({ field: `event.${e.name}`, label: e.name, kind: 'event', section: 'Events' });
    }
    for (const a of ENGAGEMENT) options.push({ field: `email.${a}`, label: `Email ${a}`, kind: 'event', section: 'Email activity' });
    for (const s of segments.data ?? []) {
      if (s.id !== excludeSegmentId) options.push({ field: `segment.${s.id}`, label: s.name, kind: 'segment', section: 'Segments' });
    }
  } else {
    for (const f of journeyFields.data?.fields ?? []) {
      const section = f.source === 'contact' ? 'Contact' : f.source === 'data' ? 'Custom fields' : 'Events';
      const label = STANDARD_LABELS[f.field] ?? f.field.replace(/^(data|event)\./, '');
      options.push({ field: f.field, label, kind: f.type, section });
    }
  }
  const error = contactFields.error ?? events.error ?? segments.error ?? journeyFields.error;
  const loading = segmentMode ? contactFields.isPending || events.isPending || segments.isPending : journeyFields.isPending;
  return { options, error, loading };
}

/** A field the lists do not name (a nested data path, a journey's event data path) still gets a kind. */
function kindOf(field: string, options: FieldOption[], operator?: ConditionOperator): FieldKind {
  const known = options.find((o) => o.field === field);
  if (known) return known.kind;
  if (field.startsWith('email.') && ENGAGEMENT.includes(field.slice(6) as (typeof ENGAGEMENT)[number])) return 'event';
  if (field.startsWith('segment.')) return 'segment';
  if (field === 'createdAt' || field === 'updatedAt') return 'date';
  if (field === 'subscribed' || field === 'contact.subscribed') return 'boolean';
  if (field.startsWith('event.') && (operator === undefined || OPERATORS.event.includes(operator))) return 'event';
  return 'string';
}

/** The value a filter starts with when its field or operator changes. */
function defaults(kind: FieldKind, operator: ConditionOperator): Pick<ConditionFilter, 'value' | 'unit'> {
  if (VALUELESS.includes(operator)) return {};
  if (TIMED.includes(operator)) return { value: 7, unit: 'days' };
  if (kind === 'boolean') return { value: true };
  return {};
}

/** The filter without keys that are undefined, so it is the JSON the API reads. */
function clean(f: ConditionFilter): ConditionFilter {
  const out: ConditionFilter = { field: f.field, operator: f.operator };
  if (f.value !== undefined) out.value = f.value;
  if (f.unit !== undefined) out.unit = f.unit;
  return out;
}

// ---- The component --------------------------------------------------------------------------------------

const CUSTOM_FIELD = '__custom';

export function ConditionBuilder({ mode = 'segment', value, onChange, label = 'Condition', excludeSegmentId, disabled }: ConditionBuilderProps) {
  const { options, error, loading } = useFieldOptions(mode, excludeSegmentId);
  const emit = (next: Condition) => onChange(next, isCompleteCondition(next));

  if (mode === 'filter') {
    const filter = value && isFilter(value) ? value : blankFilter();
    return (
      <fieldset className="condition-builder" disabled={disabled}>
        <legend>{label}</legend>
        <div className="cb-body">
          {error ? <FieldsError error={error} /> : null}
          <FilterRow filter={filter} options={options} loading={loading} mode={mode} position="" onChange={(f) => emit(clean(f))} />
        </div>
      </fieldset>
    );
  }

  const group: ConditionGroup = !value ? (emptyCondition('segment') as ConditionGroup) : isFilter(value) ? { logic: 'AND', groups: [{ filters: [value] }] } : value;
  return (
    <fieldset className="condition-builder" disabled={disabled}>
      <legend>{label}</legend>
      <div className="cb-body">
        {error ? <FieldsError error={error} /> : null}
        <GroupEditor group={group} options={options} loading={loading} depth={1} path="" onChange={emit} />
      </div>
    </fieldset>
  );
}

function FieldsError({ error }: { error: unknown }) {
  return (
    <p role="alert" className="field-error">
      The lists of fields could not be loaded: {error instanceof Error ? error.message : String(error)}
    </p>
  );
}

interface GroupEditorProps {
  group: ConditionGroup;
  options: FieldOption[];
  loading: boolean;
  depth: number;
  /** Where this condition sits, for the labels of its controls ("" at the top, "group 2 › " nested). */
  path: string;
  onChange: (next: ConditionGroup) => void;
  onRemove?: () => void;
}

function GroupEditor({ group, options, loading, depth, path, onChange, onRemove }: GroupEditorProps) {
  const logicId = useId();
  const setGroup = (index: number, next: ConditionFilterGroup | null) => {
    const groups = group.groups.flatMap((g, i) => (i !== index ? [g] : next ? [next] : []));
    onChange({ ...group, groups: groups.length ? groups : [{ filters: [blankFilter()] }] });
  };
  return (
    <div className="cb-condition">
      <div className="cb-logic">
        <label htmlFor={logicId}>{path ? `${path}Match` : 'Match'}</label>
        <select id={logicId} value={group.logic} onChange={(e) => onChange({ ...group, logic: e.target.value as 'AND' | 'OR' })}>
          <option value="AND">all of the groups</option>
          <option value="OR">any of the groups</option>
        </select>
        {onRemove ? (
          <button type="button" className="button-small" onClick={onRemove}>
            Remove {path.replace(/ › $/, '')}
          </button>
        ) : null}
      </div>
      {group.groups.map((g, gi) => {
        const groupPath = `${path}group ${gi + 1}`;
        return (
          <Fragment key={gi}>
            {gi > 0 ? (
              <p className="cb-joiner" aria-hidden="true">
                {group.logic === 'AND' ? 'and' : 'or'}
              </p>
            ) : null}
            <div className="cb-group" role="group" aria-label={groupPath}>
              <p className="cb-group-title">
                <strong>{groupPath[0]!.toUpperCase() + groupPath.slice(1)}</strong> <span className="muted">· every filter holds</span>
              </p>
              {g.filters.map((f, fi) => (
                <FilterRow
                  key={fi}
                  filter={f}
                  options={options}
                  loading={loading}
                  mode="segment"
                  position={`${groupPath}, filter ${fi + 1}`}
                  onChange={(next) => setGroup(gi, { ...g, filters: g.filters.map((x, i) => (i === fi ? clean(next) : x)) })}
                  onRemove={() => {
                    const filters = g.filters.filter((_, i) => i !== fi);
                    setGroup(gi, filters.length || g.conditions ? { ...g, filters } : null);
                  }}
                />
              ))}
              {g.conditions ? (
                <GroupEditor
                  group={g.conditions}
                  options={options}
                  loading={loading}
                  depth={depth + 1}
                  path={`${groupPath} › `}
                  onChange={(next) => setGroup(gi, { ...g, conditions: next })}
                  onRemove={() => {
                    const { conditions: _removed, ...rest } = g;
                    setGroup(gi, rest.filters.length ? rest : null);
                  }}
                />
              ) : null}
              <div className="actions">
                <button type="button" className="button-small" onClick={() => setGroup(gi, { ...g, filters: [...g.filters, blankFilter()] })}>
                  Add filter to {groupPath}
                </button>
                {!g.conditions && depth < MAX_DEPTH ? (
                  <button
                    type="button"
                    className="button-small"
                    onClick={() => setGroup(gi, { ...g, conditions: { logic: 'OR', groups: [{ filters: [blankFilter()] }] } })}
                  >
                    Add nested condition to {groupPath}
                  </button>
                ) : null}
                {group.groups.length > 1 ? (
                  <button type="button" className="button-small button-danger" onClick={() => setGroup(gi, null)}>
                    Remove {groupPath}
                  </button>
                ) : null}
              </div>
            </div>
          </Fragment>
        );
      })}
      <button type="button" className="button-small" onClick={() => onChange({ ...group, groups: [...group.groups, { filters: [blankFilter()] }] })}>
        {path ? `Add group to ${path.replace(/ › $/, '')}` : 'Add group'}
      </button>
    </div>
  );
}

interface FilterRowProps {
  filter: ConditionFilter;
  options: FieldOption[];
  loading: boolean;
  mode: 'segment' | 'filter';
  /** Names the row in its controls' labels, e.g. "group 1, filter 2". */
  position: string;
  onChange: (next: ConditionFilter) => void;
  onRemove?: () => void;
}

function FilterRow({ filter, options, loading, mode, position, onChange, onRemove }: FilterRowProps) {
  const id = useId();
  const kind = kindOf(filter.field, options, filter.operator);
  const listed = options.some((o) => o.field === filter.field);
  // A field the lists do not name is edited as a path: data.<path> (or event.<path> in a journey).
  const custom = filter.field !== '' && !listed;
  const of = position ? ` (${position})` : '';

  const operators = OPERATORS[kind].includes(filter.operator) ? OPERATORS[kind] : [...OPERATORS[kind], filter.operator];

  const pickField = (field: string) => {
    if (field === CUSTOM_FIELD) {
      onChange({ field: 'data.', operator: 'equals' });
      return;
    }
    const nextKind = kindOf(field, options);
    const operator = OPERATORS[nextKind].includes(filter.operator) && nextKind === kind ? filter.operator : OPERATORS[nextKind][0]!;
    const keep = nextKind === kind && operator === filter.operator;
    onChange({ field, operator, ...(keep ? { value: filter.value, unit: filter.unit } : defaults(nextKind, operator)) });
  };

  const pickOperator = (operator: ConditionOperator) => {
    const sameShape = TIMED.includes(operator) === TIMED.includes(filter.operator) && VALUELESS.includes(operator) === VALUELESS.includes(filter.operator);
    onChange({ field: filter.field, operator, ...(sameShape ? { value: filter.value, unit: filter.unit } : defaults(kind, operator)) });
  };

  const sections = [...new Set(options.map((o) => o.section))];
  const pathPrefix = filter.field.startsWith('event.') ? 'event.' : 'data.';

  return (
    <div className="cb-filter">
      <div className="cb-control cb-field">
        <label htmlFor={`${id}-field`}>Field{of && <span className="visually-hidden">{of}</span>}</label>
        <select id={`${id}-field`} value={custom ? CUSTOM_FIELD : filter.field} onChange={(e) => pickField(e.target.value)}>
          <option value="" disabled>
            {loading ? 'Loading fields…' : 'Choose a field'}
          </option>
          {sections.map((section) => (
            <optgroup key={section} label={section}>
              {options
                .filter((o) => o.section === section)
                .map((o) => (
                  <option key={o.field} value={o.field}>
                    {o.label}
                  </option>
                ))}
            </optgroup>
          ))}
          <option value={CUSTOM_FIELD}>{mode === 'filter' ? 'Another data or event path…' : 'Another data path…'}</option>
        </select>
      </div>
      {custom ? (
        <div className="cb-control cb-path">
          <label htmlFor={`${id}-path`}>Path{of && <span className="visually-hidden">{of}</span>}</label>
          <div className="cb-path-input">
            {mode === 'filter' ? (
              <select
                aria-label={`Path source${of}`}
                value={pathPrefix}
                onChange={(e) => onChange({ ...filter, field: e.target.value + filter.field.slice(pathPrefix.length) })}
              >
                <option value="data.">data.</option>
                <option value="event.">event.</option>
              </select>
            ) : (
              <span className="cb-prefix" aria-hidden="true">
                data.
              </span>
            )}
            <input
              id={`${id}-path`}
              value={filter.field.slice(pathPrefix.length)}
              placeholder="address.city"
              autoComplete="off"
              onChange={(e) => onChange({ ...filter, field: pathPrefix + e.target.value.trim() })}
            />
          </div>
        </div>
      ) : null}
      <div className="cb-control cb-operator">
        <label htmlFor={`${id}-operator`}>Operator{of && <span className="visually-hidden">{of}</span>}</label>
        <select id={`${id}-operator`} value={filter.operator} onChange={(e) => pickOperator(e.target.value as ConditionOperator)}>
          {operators.map((op) => (
            <option key={op} value={op}>
              {operatorLabel(op, kind)}
            </option>
          ))}
        </select>
      </div>
      <ValueInput id={`${id}-value`} of={of} kind={kind} filter={filter} onChange={onChange} />
      {onRemove ? (
        <div className="cb-remove">
          <button type="button" className="button-small button-danger" onClick={onRemove} aria-label={`Remove filter${of}`}>
            Remove
          </button>
        </div>
      ) : null}
    </div>
  );
}

function ValueInput({ id, of, kind, filter, onChange }: { id: string; of: string; kind: FieldKind; filter: ConditionFilter; onChange: (next: ConditionFilter) => void }) {
  const hidden = of && <span className="visually-hidden">{of}</span>;
  if (VALUELESS.includes(filter.operator)) return null;
  if (TIMED.includes(filter.operator)) {
    return (
      <div className="cb-control cb-duration">
        <div>
          <label htmlFor={id}>Amount{hidden}</label>
          <input
            id={id}
            type="number"
            min={0}
            step="any"
            inputMode="decimal"
            value={typeof filter.value === 'number' ? filter.value : ''}
            onChange={(e) => onChange({ ...filter, value: e.target.value === '' ? undefined : Number(e.target.value) })}
          />
        </div>
        <div>
          <label htmlFor={`${id}-unit`}>Unit{hidden}</label>
          <select id={`${id}-unit`} value={filter.unit ?? ''} onChange={(e) => onChange({ ...filter, unit: (e.target.value || undefined) as DurationUnit | undefined })}>
            <option value="" disabled>
              Choose
            </option>
            <option value="minutes">minutes</option>
            <option value="hours">hours</option>
            <option value="days">days</option>
          </select>
        </div>
      </div>
    );
  }
  if (kind === 'boolean') {
    return (
      <div className="cb-control cb-value">
        <label htmlFor={id}>Value{hidden}</label>
        <select id={id} value={String(filter.value ?? '')} onChange={(e) => onChange({ ...filter, value: e.target.value === 'true' })}>
          <option value="" disabled>
            Choose
          </option>
          <option value="true">true</option>
          <option value="false">false</option>
        </select>
      </div>
    );
  }
  if (kind === 'number') {
    return (
      <div className="cb-control cb-value">
        <label htmlFor={id}>Value{hidden}</label>
        <input
          id={id}
          type="number"
          step="any"
          inputMode="decimal"
          value={typeof filter.value === 'number' ? filter.value : typeof filter.value === 'string' ? filter.value : ''}
          onChange={(e) => onChange({ ...filter, value: e.target.value === '' ? undefined : Number(e.target.value) })}
        />
      </div>
    );
  }
  if (kind === 'date') {
    // A date field compares as an instant; YYYY-MM-DD is midnight UTC (db/conditions/values.ts).
    const text = typeof filter.value === 'string' ? filter.value : '';
    const dateOnly = text === '' || /^\d{4}-\d{2}-\d{2}$/.test(text);
    return (
      <div className="cb-control cb-value">
        <label htmlFor={id}>Date{hidden}</label>
        <input
          id={id}
          type={dateOnly ? 'date' : 'text'}
          value={text}
          onChange={(e) => onChange({ ...filter, value: e.target.value === '' ? undefined : e.target.value })}
        />
      </div>
    );
  }
  return (
    <div className="cb-control cb-value">
      <label htmlFor={id}>Value{hidden}</label>
      <input
        id={id}
        type="text"
        autoComplete="off"
        value={filter.value === undefined ? '' : String(filter.value)}
        onChange={(e) => onChange({ ...filter, value: e.target.value })}
      />
    </div>
  );
}
