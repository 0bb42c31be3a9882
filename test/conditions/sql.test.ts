import { evaluateCondition } from '../../db/conditions/evaluate';
import { parseFullIsoDateTime } from '../../db/conditions/values';
import type { FieldType } from '../../db/entities/contact-field';
import { deleteEventsByName } from '../../db/events/events';
import { prepareFieldSlots } from '../../db/conditions/field-slots';
import { removeFieldBatch, unregisterField } from '../../db/contacts/fields';
import { newId } from '../../db/ids';
import { resetProject } from '../../db/projects/reset';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { loadCompileContext } from '../../db/conditions/compile-context';
import type { Condition, ConditionFilter } from '../../db/conditions/grammar';
import { segmentPredicate } from '../../db/segments/audience';
import { type CompileContext, compileCondition } from '../../db/conditions/sql';
import { query } from '../../db/sql';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * The segment compiler against the real database. The core is differential: thousands of filters
 * (every operator × field kind × value shape) are compiled, run as SQL over a set of contacts, and
 * compared contact by contact with the workflow CONDITION evaluator (db/conditions/evaluate.ts) that defines
 * the semantics. Then the parts the evaluator does not have: groups, deleted fields, standard
 * timestamps, email engagement, segment membership.
 */

const NOW = new Date('2025-06-15T12:00:00.000Z');
const HOUR = 3_600_000;

let env: TestEnv;
let project: ProjectWithKeys;
const em = () => env.orm.em.fork();

interface Person {
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  /** created_at, with microseconds: the API shows milliseconds, filters must agree with that. */
  createdAt: string;
}

const people: Person[] = [
  {
    email: 'ann@example.org',
    subscribed: true,
    createdAt: '2025-06-14T12:00:00.123456Z',
    data: {
      plan: 'Pro',
      seats: 12,
      scoreText: '42',
      trial: false,
      tags: ['VIP', 'beta'],
      nums: [1, 2, 3],
      address: { city: 'Paris', geo: { lat: 48.85 } },
      'utm.source': 'newsletter',
      signupAt: '2025-06-14T12:00:00Z',
      renewsOn: '2025-07-01',
      usDate: '01/31/2024',
      items: [{ sku: 'A1' }, { sku: 'B2' }],
      score: 5,
      code: '007',
      mixed: 'abc',
      cart: { coupon: null, items: 3 },
    },
  },
  {
    email: 'bob@example.org',
    subscribed: false,
    createdAt: '2025-06-15T11:30:00.000999Z',
    data: {
      plan: 'free',
      seats: '100',
      scoreText: 7,
      trial: 'true',
      tags: 'vip',
      nums: 2,
      address: 'Paris',
      signupAt: '2025-06-15T13:30:00+02:00',
      renewsOn: '2025-06-30T23:59:59Z',
      usDate: '2025-06-15T11:00:00',
      score: '42',
      code: 1,
      mixed: 12,
      empty: null,
      cart: { items: '3' },
      when: '2025-06-16T10:59:00+23:59',
    },
  },
  {
    email: 'cy@example.org',
    subscribed: true,
    createdAt: '2024-01-01T00:00:00.000Z',
    data: {
      plan: 'PRO ',
      seats: 12.5,
      trial: true,
      tags: [],
      nums: ['2', 3.5],
      signupAt: '2025-02-30T00:00:00Z',
      renewsOn: 'garbage',
      score: 'n/a',
      mixed: true,
      items: [{ sku: 'a1' }],
      dates: ['2025-06-14T12:00:00Z'],
      'utm.source': 'ADS',
      bracket: '[X]',
      brace: { a: 1 },
      when: '2025-06-15T11:00:00.999+00:00',
    },
  },
  {
    email: 'dee@example.org',
    subscribed: true,
    createdAt: '2025-06-15T12:00:00.000Z',
    data: {
      plan: 'team',
      seats: 0,
      scoreText: '1e2',
      trial: false,
      tags: ['alpha', 12, true, null, { x: 1 }],
      address: { city: 'paris' },
      utm: { source: 'nested' },
      signupAt: '2025-06-15T12:30:00.5Z',
      renewsOn: '2025-07-01T00:00:00Z',
      score: ' 7 ',
      code: '007.0',
      mixed: null,
      empty: null,
      when: '2025-06-15T11:00:00Z',
    },
  },
  { email: 'eve@example.org', subscribed: false, createdAt: '2023-03-03T03:03:03.003Z', data: {} },
  {
    email: 'fay@example.org',
    subscribed: true,
    createdAt: '2025-06-15T12:00:00.001Z',
    data: { when: '2025-06-14T12:30-23:30', bracket: ['[x]'], brace: '{"a":1}', plan: 'Pro', seats: -3, score: 9.5, signupAt: '2025-06-08T12:00:00.000Z', renewsOn: '2025-06-15', tags: ['beta'], code: '7', mixed: 'ABC' },
  },
];

/** The project's field types, as the first values seen would have fixed them. */
const FIELD_TYPES: Record<string, FieldType> = {
  plan: 'string',
  seats: 'number',
  scoreText: 'string',
  trial: 'boolean',
  tags: 'string',
  nums: 'string',
  address: 'string',
  'utm.source': 'string',
  utm: 'string',
  signupAt: 'date',
  renewsOn: 'date',
  usDate: 'string',
  items: 'string',
  score: 'number',
  code: 'string',
  mixed: 'string',
  cart: 'string',
  dates: 'string',
  when: 'date',
  empty: 'string',
  bracket: 'string',
  brace: 'string',
};

const ids: Record<string, string> = {};

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('segment sql');
  for (const p of people) {
    const id = newId('cnt');
    ids[p.email] = id;
    await query(em(), 'insert into contacts (id, project_id, email, subscribed, data, created_at, updated_at) values (?, ?, ?, ?, ?::jsonb, ?, ?)', [
      id,
      project.id,
      p.email,
      p.subscribed,
      JSON.stringify(p.data),
      p.createdAt,
      p.createdAt,
    ]);
  }
  await query(em(), 'insert into contact_fields (project_id, key, type) select ?, k, t from unnest(?::text[], ?::text[]) as f(k, t)', [
    project.id,
    Object.keys(FIELD_TYPES),
    Object.values(FIELD_TYPES),
  ]);
  // Events at fixed distances from NOW.
  const event = async (email: string, name: string, hoursAgo: number) =>
    query(em(), 'insert into events (id, project_id, contact_id, name, created_at) values (?, ?, ?, ?, ?)', [
      newId('evt'),
      project.id,
      ids[email],
      name,
      new Date(NOW.getTime() - hoursAgo * HOUR).toISOString(),
    ]);
  await event('ann@example.org', 'purchase', 1);
  await event('ann@example.org', 'purchase', 24 * 10);
  await event('bob@example.org', 'purchase', 24 * 3);
  await event('bob@example.org', 'viewed', 0.25);
  await event('cy@example.org', 'email.opened', 2);
  await event('dee@example.org', 'purchase', -1); // in the future
});

afterAll(() => env.close());

async function context(now = NOW): Promise<CompileContext> {
  return loadCompileContext(em(), project.id, [], now);
}

/**
 * Runs many filters in few statements (one boolean column each) and returns, per filter, the
 * emails that match. Every value must be true or false: a compiled filter is never NULL.
 */
async function sqlMatches(conditions: Condition[], ctx?: CompileContext): Promise<string[][]> {
  const compileCtx = ctx ?? (await loadCompileContext(em(), project.id, conditions, NOW));
  const out: string[][] = conditions.map(() => []);
  const BATCH = 250;
  for (let start = 0; start < conditions.length; start += BATCH) {
    const batch = conditions.slice(start, start + BATCH).map((c) => compileCondition(c, compileCtx));
    const rows = await query<Record<string, unknown>>(
      em(),
      `select c.email, ${batch.map((b, i) => `(${b.sql}) as m${i}`).join(', ')} from contacts c where c.project_id = ? order by c.email`,
      [...batch.flatMap((b) => b.params), project.id],
    );
    for (const row of rows) {
      batch.forEach((_, i) => {
        const v = row[`m${i}`];
        if (v !== true && v !== false) throw new Error(`filter ${JSON.stringify(conditions[start + i])} gave ${String(v)} for ${String(row.email)}`);
        if (v) out[start + i]!.push(row.email as string);
      });
    }
  }
  return out;
}

const matching = async (condition: Condition, ctx?: CompileContext) => (await sqlMatches([condition], ctx))[0]!;

const VALUE_OPERATORS = [
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
] as const;

const VALUES: (string | number | boolean)[] = [
  'pro', 'PRO', 'Pro', 'PRO ', 'free', 'team', 'a', 'z', '',
  12, '12', '12.0', 12.5, 5, '9', 'nine', 0, -3, '7', 7, 100, '1e2', 42, '42', 9.5, '007', 1,
  true, 'true', false, 'FALSE',
  'vip', 'VIP', 'beta', 2, '2', 3.5, 'paris', 'PARIS', 'newsletter', 'abc', 'b', 'a1', 3, '3',
  '2025-06-14T12:00:00Z', '2025-06-14T14:00:00+02:00', '2025-06-14T13:00:00+02:00', '2025-07-01', '2025-07-01T00:00:00Z',
  '2025-06-30', '2025-06-30T23:59:59Z', '2025-06-15T11:30:00Z', '01/31/2024', '2025-02-30T00:00:00Z', '2025-06-15',
  '[x]', '{"a":1}', '{"a": 1}', '["VIP", "beta"]', '{',
  '2025-06-15T11:00:00.999Z', '2025-06-15T11:00:01Z', '2025-06-15T11:00:00+00:00', '2025-06-16T10:59:00+23:59', '2025-06-15T10:00:00-01:00',
  '2025-06-15T12:00:00-00:00', '2025-06-14', '2025-06-16',
];

const DATA_FIELDS = [
  'data.plan', 'data.seats', 'data.scoreText', 'data.trial', 'data.tags', 'data.nums', 'data.address', 'data.address.city',
  'data.address.geo.lat', 'data.utm.source', 'data.signupAt', 'data.renewsOn', 'data.usDate', 'data.items.0.sku', 'data.items.1.sku',
  'data.score', 'data.code', 'data.mixed', 'data.empty', 'data.nope', 'data.cart.coupon', 'data.cart.items', 'data.dates', 'data.when',
  'data.bracket', 'data.brace',
];

const DURATIONS: { value: number; unit: 'minutes' | 'hours' | 'days' }[] = [
  { value: 30, unit: 'minutes' },
  { value: 31, unit: 'minutes' },
  { value: 23, unit: 'hours' },
  { value: 1, unit: 'days' },
  { value: 2, unit: 'days' },
  { value: 7, unit: 'days' },
  { value: 100_000, unit: 'days' },
  { value: 0, unit: 'minutes' },
];

function evaluatorSays(person: Person, filter: ConditionFilter, eventTimes: Date[] = []): boolean {
  const isCreatedAt = filter.field === 'createdAt';
  const field = isCreatedAt ? 'data.__createdAt' : filter.field;
  const data = isCreatedAt ? { __createdAt: new Date(person.createdAt).toISOString() } : person.data;
  const path = field.startsWith('data.') ? field.slice(5) : undefined;
  return evaluateCondition({
    contact: { email: person.email, subscribed: person.subscribed, data },
    context: {},
    condition: { ...filter, field },
    now: NOW,
    fieldType: isCreatedAt ? 'date' : path === undefined ? undefined : FIELD_TYPES[path],
    eventTimes,
  });
}

async function expectSameAsEvaluator(filters: ConditionFilter[], eventTimes?: (p: Person, f: ConditionFilter) => Date[]) {
  const got = await sqlMatches(filters);
  const mismatches: string[] = [];
  filters.forEach((filter, i) => {
    const expected = people.filter((p) => evaluatorSays(p, filter, eventTimes?.(p, filter))).map((p) => p.email).sort();
    const actual = [...got[i]!].sort();
    if (JSON.stringify(expected) !== JSON.stringify(actual)) {
      mismatches.push(`${JSON.stringify(filter)}: evaluator ${JSON.stringify(expected)}, SQL ${JSON.stringify(actual)}`);
    }
  });
  expect(mismatches.slice(0, 20)).toEqual([]);
}

describe('the compiled SQL agrees with the workflow CONDITION evaluator', () => {
  test('data.<path>: every value operator × every value shape × every field kind', async () => {
    const filters: ConditionFilter[] = [];
    for (const field of DATA_FIELDS) {
      for (const operator of VALUE_OPERATORS) for (const value of VALUES) filters.push({ field, operator, value });
      filters.push({ field, operator: 'exists' }, { field, operator: 'notExists' });
      for (const d of DURATIONS) filters.push({ field, operator: 'within', ...d }, { field, operator: 'olderThan', ...d });
    }
    expect(filters.length).toBeGreaterThan(5000);
    await expectSameAsEvaluator(filters);
  });

  test('contact.email / email and contact.subscribed / subscribed', async () => {
    const filters: ConditionFilter[] = [];
    for (const field of ['contact.email', 'contact.subscribed']) {
      const values = [...VALUES, 'ann@example.org', 'ANN@EXAMPLE.ORG', 'example', 'bob@', 'c', 'dee@example.org'];
      for (const operator of VALUE_OPERATORS) for (const value of values) filters.push({ field, operator, value });
      filters.push({ field, operator: 'exists' }, { field, operator: 'notExists' });
      for (const d of DURATIONS) filters.push({ field, operator: 'within', ...d }, { field, operator: 'olderThan', ...d });
    }
    await expectSameAsEvaluator(filters);
    // The bare names are the same fields.
    expect(await matching({ field: 'email', operator: 'contains', value: 'BOB' })).toEqual(['bob@example.org']);
    expect(await matching({ field: 'subscribed', operator: 'equals', value: false })).toEqual(['bob@example.org', 'eve@example.org']);
  });

  test('createdAt behaves as a date field holding the millisecond ISO text the API shows', async () => {
    const values = [
      ...VALUES,
      '2025-06-14T12:00:00.123Z', '2025-06-14T12:00:00.124Z', '2025-06-14T12:00:00.122Z', '2025-06-15T11:30:00.000Z', '2025-06-15T11:30:00.001Z',
      '2025-06-15T12:00:00.001Z', '2025-06-15T12:00:00Z', '2024-01-01', '2023-03-03T03:03:03.003Z', '.123z', '2025-06', 'T12',
    ];
    const filters: ConditionFilter[] = [];
    for (const operator of VALUE_OPERATORS) for (const value of values) filters.push({ field: 'createdAt', operator, value });
    filters.push({ field: 'createdAt', operator: 'exists' }, { field: 'createdAt', operator: 'notExists' });
    for (const d of DURATIONS) filters.push({ field: 'createdAt', operator: 'within', ...d }, { field: 'createdAt', operator: 'olderThan', ...d });
    await expectSameAsEvaluator(filters);
  });

  test('event.<name>: triggered, notTriggered, triggeredWithin, triggeredOlderThan', async () => {
    const rows = await query<{ contact_id: string; name: string; first: Date; last: Date }>(
      em(),
      'select contact_id, name, min(created_at) as first, max(created_at) as last from events where project_id = ? group by 1, 2',
      [project.id],
    );
    const times = (p: Person, f: ConditionFilter) =>
      rows.filter((r) => r.contact_id === ids[p.email] && `event.${r.name}` === f.field).flatMap((r) => [new Date(r.first), new Date(r.last)]);
    const filters: ConditionFilter[] = [];
    for (const field of ['event.purchase', 'event.viewed', 'event.email.opened', 'event.never']) {
      filters.push({ field, operator: 'triggered' }, { field, operator: 'notTriggered' });
      for (const d of [...DURATIONS, { value: 2, unit: 'hours' as const }, { value: 9, unit: 'days' as const }, { value: 11, unit: 'days' as const }]) {
        filters.push({ field, operator: 'triggeredWithin', ...d }, { field, operator: 'triggeredOlderThan', ...d });
      }
    }
    await expectSameAsEvaluator(filters, times);
  });
});

describe('segment_iso_ms (the SQL side of the date rules)', () => {
  test('reads exactly the texts conditions.ts parseFullIsoDateTime reads, to the same millisecond', async () => {
    const samples = [
      '2025-06-15T12:00:00Z', '2025-06-15T12:00:00.000Z', '2025-06-15T14:00:00+02:00', '2025-06-15T07:30-0430', '2025-06-15T07:30-04',
      '2025-06-15', '2025-06-15T12:00:00', '06/15/2025', '2025-02-30T00:00:00Z', '2025-06-15T24:00:00Z', '2024-02-29T00:00Z',
      '2023-02-29T00:00Z', '1900-02-29T00:00Z', '2000-02-29T00:00Z', '0099-01-01T00:00:00Z', '0100-01-01T00:00:00Z', '2025-06-15t12:00:00.29z',
      '2025-06-15T12:00:00,123456+05', '2025-06-15T12:00:00+24:00', '2025-06-15T12:00:00+23:60', '2025-06-15T12:00:00+23:59',
      '2025-06-15T12:00:60Z', '1999-12-31T23:59:59.9999Z', '2025-13-01T00:00:00Z', '2025-00-10T00:00:00Z', '2025-06-00T00:00:00Z',
      '2025-06-31T00:00:00Z', '2025-06-15T12:00:00.5-00:30', '2025-06-15T12:60Z', '2025-06-15T12:00:00.Z', '2025-06-15T12:00:00+0',
      '2025-06-15T12:00:00+05:3', '2025-06-15T12:00:00+05:300', ' 2025-06-15T12:00:00Z', '2025-06-15T12:00:00Z ', '+2025-06-15T12:00:00Z',
      '2025-06-15 12:00:00Z', '20250615T120000Z', '2025-6-15T12:00:00Z', '', 'Z', '2025-06-15T12:00:00-05', '2025-06-15T12:00:00.1234567891Z',
      '2025-06-1xT12:00:00Z', '2025-06-15T12:00:00.12xZ', '2025-06-15T12:00:00.123z', '2025-06-15T12:00:00x123Z', '2025-06-15T12:00:00.999Z',
      '2025-06-15T12:00:00.1Z', '2025-06-15T12:00:00.12Z', '2025-06-15T1:00:00.123Z', '9999-12-31T23:59:59.999Z', 'abcd-ef-ghTij:kl:mnZ',
    ];
    const rows = await query<{ s: string; full: string | null; dated: string | null }>(
      em(),
      'select s, segment_iso_ms(s, false) as full, segment_iso_ms(s, true) as dated from unnest(?::text[]) as s',
      [samples],
    );
    const dateOnly = (v: string) => (/^\d{4}-\d{2}-\d{2}$/.test(v) ? parseFullIsoDateTime(`${v}T00:00:00Z`) : parseFullIsoDateTime(v));
    const got = rows.map((r) => [r.s, r.full === null ? null : Number(r.full), r.dated === null ? null : Number(r.dated)]);
    const expected = samples.map((v) => [v, parseFullIsoDateTime(v) ?? null, dateOnly(v) ?? null]);
    expect(got).toEqual(expected);
  });
});

describe('type-aware comparison and the ISO date rule (spot checks)', () => {
  test("numbers compare as numbers; a numeric string is a number only when the project types the field number", async () => {
    expect(await matching({ field: 'data.seats', operator: 'lessThan', value: 100 })).toEqual(['ann@example.org', 'cy@example.org', 'dee@example.org', 'fay@example.org']);
    // seats is a number field: bob's "100" is the number 100, not text.
    expect(await matching({ field: 'data.seats', operator: 'greaterThanOrEqual', value: '100' })).toEqual(['bob@example.org']);
    // score is a number field: bob's "42" and dee's " 7 " count; "n/a" does not.
    expect(await matching({ field: 'data.score', operator: 'gt', value: 6 })).toEqual(['bob@example.org', 'dee@example.org', 'fay@example.org']);
    // code is a string field: "007" is text, it never orders against a number.
    expect(await matching({ field: 'data.code', operator: 'gt', value: 1 })).toEqual([]);
    expect(await matching({ field: 'data.code', operator: 'equals', value: '007' })).toEqual(['ann@example.org']);
  });

  test('a number field whose key needs quoting in a JSON path orders like the evaluator says', async () => {
    const p = await env.project('quoted keys');
    const keys = ['we"ird', 'back\\slash', '$n', 'sp ace', 'ünï'];
    const values: unknown[] = [5, '7', ' 8 ', [9], true, 'n/a', { v: 9 }, null, 12.5, -1];
    const people = values.map((v, i) => ({ email: `q${i}@example.org`, data: Object.fromEntries(keys.map((k) => [k, v])) }));
    for (const person of people) {
      await query(em(), 'insert into contacts (id, project_id, email, subscribed, data) values (?, ?, ?, true, ?::jsonb)', [newId('cnt'), p.id, person.email, JSON.stringify(person.data)]);
    }
    await query(em(), `insert into contact_fields (project_id, key, type) select ?, k, 'number' from unnest(?::text[]) as k`, [p.id, keys]);
    for (const key of keys) {
      for (const operator of ['greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual'] as const) {
        for (const value of [7, '7', 0, 12.5, -1]) {
          const filter: ConditionFilter = { field: `data.${key}`, operator, value };
          const ctx = await loadCompileContext(em(), p.id, [filter], NOW);
          const compiled = compileCondition(filter, ctx);
          const rows = await query<{ email: string }>(em(), `select c.email from contacts c where c.project_id = ? and (${compiled.sql}) order by c.email`, [p.id, ...compiled.params]);
          const expected = people
            .filter((person) =>
              evaluateCondition({
                contact: { email: person.email, subscribed: true, data: person.data as Record<string, never> },
                context: {},
                condition: filter,
                now: NOW,
                fieldType: 'number',
                eventTimes: [],
              }),
            )
            .map((person) => person.email)
            .sort();
          expect({ filter, emails: rows.map((r) => r.email) }).toEqual({ filter, emails: expected });
        }
      }
    }
  });

  test('dates compare as instants: date-typed fields accept YYYY-MM-DD, other fields need full ISO on both sides', async () => {
    expect(await matching({ field: 'data.renewsOn', operator: 'greaterThan', value: '2025-06-30T23:59:59Z' })).toEqual(['ann@example.org', 'dee@example.org']);
    expect(await matching({ field: 'data.renewsOn', operator: 'equals', value: '2025-07-01T00:00:00+00:00' })).toEqual(['ann@example.org', 'dee@example.org']);
    expect(await matching({ field: 'data.signupAt', operator: 'lessThan', value: '2025-06-15T12:00:00+01:00' })).toEqual(['ann@example.org', 'fay@example.org']);
  });

  test('within / olderThan: full ISO 8601 date-times only; a future date is within', async () => {
    // ann 1 day ago, bob 30 min ago (+02:00), dee in the future, fay 7 days ago; cy's Feb 30 is no date.
    expect(await matching({ field: 'data.signupAt', operator: 'within', value: 2, unit: 'days' })).toEqual(['ann@example.org', 'bob@example.org', 'dee@example.org']);
    expect(await matching({ field: 'data.signupAt', operator: 'olderThan', value: 2, unit: 'days' })).toEqual(['fay@example.org']);
    // YYYY-MM-DD (even on a date field), a US date and a time without a zone never match.
    expect(await matching({ field: 'data.renewsOn', operator: 'olderThan', value: 1, unit: 'minutes' })).toEqual([]);
    expect(await matching({ field: 'data.renewsOn', operator: 'within', value: 100_000, unit: 'days' })).toEqual(['bob@example.org', 'dee@example.org']);
    expect(await matching({ field: 'data.usDate', operator: 'within', value: 100_000, unit: 'days' })).toEqual([]);
    expect(await matching({ field: 'data.usDate', operator: 'olderThan', value: 1, unit: 'minutes' })).toEqual([]);
  });
});

describe('groups and nesting', () => {
  const pro: ConditionFilter = { field: 'data.plan', operator: 'equals', value: 'pro' };
  const subscribed: ConditionFilter = { field: 'subscribed', operator: 'equals', value: true };
  const free: ConditionFilter = { field: 'data.plan', operator: 'equals', value: 'free' };
  const beta: ConditionFilter = { field: 'data.tags', operator: 'contains', value: 'beta' };

  test('filters in a group all hold; groups combine with the logic', async () => {
    expect(await matching({ logic: 'AND', groups: [{ filters: [pro, subscribed] }] })).toEqual(['ann@example.org', 'fay@example.org']);
    expect(await matching({ logic: 'OR', groups: [{ filters: [pro] }, { filters: [free] }] })).toEqual(['ann@example.org', 'bob@example.org', 'fay@example.org']);
    expect(await matching({ logic: 'AND', groups: [{ filters: [pro] }, { filters: [beta] }] })).toEqual(['ann@example.org', 'fay@example.org']);
    expect(await matching({ logic: 'OR', groups: [{ filters: [pro, beta] }, { filters: [{ field: 'data.seats', operator: 'equals', value: 0 }] }] })).toEqual([
      'ann@example.org',
      'dee@example.org',
      'fay@example.org',
    ]);
  });

  test('a nested condition holds together with its group’s filters, to any depth', async () => {
    // subscribed AND (free OR team OR (pro AND seats < 0))
    const nested: Condition = {
      logic: 'AND',
      groups: [
        {
          filters: [subscribed],
          conditions: {
            logic: 'OR',
            groups: [
              { filters: [free] },
              { filters: [{ field: 'data.plan', operator: 'equals', value: 'TEAM' }] },
              { filters: [], conditions: { logic: 'AND', groups: [{ filters: [pro, { field: 'data.seats', operator: 'lt', value: 0 }] }] } },
            ],
          },
        },
      ],
    };
    expect(await matching(nested)).toEqual(['dee@example.org', 'fay@example.org']);
  });

  test('a single filter is a condition too; the compiled condition can be negated', async () => {
    const compiled = compileCondition(pro, await context());
    const rows = await query<{ email: string }>(em(), `select email from contacts c where c.project_id = ? and not (${compiled.sql}) order by email`, [
      project.id,
      ...compiled.params,
    ]);
    expect(rows.map((r) => r.email)).toEqual(['bob@example.org', 'cy@example.org', 'dee@example.org', 'eve@example.org']);
  });
});

describe('deleted custom fields', () => {
  test('a deleted field matches nothing, notExists and notEquals included; a key never seen is simply missing; a key set again is a field again', async () => {
    const other = await env.project('deleted fields');
    const a = newId('cnt');
    const b = newId('cnt');
    await query(em(), `insert into contacts (id, project_id, email, subscribed, data) values (?, ?, 'a@x.org', true, '{"tier":"gold"}'), (?, ?, 'b@x.org', true, '{}')`, [
      a,
      other.id,
      b,
      other.id,
    ]);
    await query(em(), `insert into contact_fields (project_id, key, type) values (?, 'tier', 'string')`, [other.id]);
    const run = async (filter: Condition) => {
      const ctx = await loadCompileContext(em(), other.id, [filter], NOW);
      const c = compileCondition(filter, ctx);
      return (await query<{ email: string }>(em(), `select email from contacts c where c.project_id = ? and (${c.sql}) order by email`, [other.id, ...c.params])).map(
        (r) => r.email,
      );
    };
    expect(await run({ field: 'data.tier', operator: 'equals', value: 'gold' })).toEqual(['a@x.org']);
    expect(await run({ field: 'data.tier', operator: 'notExists' })).toEqual(['b@x.org']);
    expect(await run({ field: 'data.never', operator: 'notExists' })).toEqual(['a@x.org', 'b@x.org']);

    // What DELETE /contacts/fields/:field does: the key leaves the registry, then the contacts.
    await unregisterField(em(), other.id, 'tier');
    // Mid-deletion (values still on contacts) and after it, the field matches nothing.
    for (const filter of [
      { field: 'data.tier', operator: 'equals', value: 'gold' },
      { field: 'data.tier', operator: 'notEquals', value: 'silver' },
      { field: 'data.tier', operator: 'exists' },
      { field: 'data.tier', operator: 'notExists' },
      { field: 'data.tier.sub', operator: 'notExists' },
    ] as ConditionFilter[]) {
      expect([filter, await run(filter)]).toEqual([filter, []]);
    }
    await removeFieldBatch(em(), other.id, 'tier', 100);
    expect(await run({ field: 'data.tier', operator: 'notExists' })).toEqual([]);
    const either: Condition = {
      logic: 'OR',
      groups: [{ filters: [{ field: 'data.tier', operator: 'notExists' }] }, { filters: [{ field: 'email', operator: 'contains', value: 'b@' }] }],
    };
    expect(await run(either)).toEqual(['b@x.org']);

    // Written again (the registry types it afresh): an ordinary field once more.
    await query(em(), `update contacts set data = '{"tier":"silver"}' where id = ?`, [b]);
    await query(em(), `insert into contact_fields (project_id, key, type) values (?, 'tier', 'string')`, [other.id]);
    expect(await run({ field: 'data.tier', operator: 'notExists' })).toEqual(['a@x.org']);
    expect(await run({ field: 'data.tier', operator: 'equals', value: 'SILVER' })).toEqual(['b@x.org']);
  });
});

describe('email engagement and segment membership', () => {
  beforeAll(async () => {
    const email = (to: string, status: string, sentHoursAgo: number | null, updatedHoursAgo: number) =>
      query(
        em(),
        `insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, status, sent_at, updated_at)
         values (gen_random_uuid(), ?, ?, 'transactional', ?, 'hi@example.com', 's', 'b', ?, ?, ?)`,
        [
          project.id,
          ids[to],
          to,
          status,
          sentHoursAgo === null ? null : new Date(NOW.getTime() - sentHoursAgo * HOUR).toISOString(),
          new Date(NOW.getTime() - updatedHoursAgo * HOUR).toISOString(),
        ],
      );
    await email('ann@example.org', 'CLICKED', 48, 47);
    await email('bob@example.org', 'OPENED', 2, 1);
    await email('cy@example.org', 'BOUNCED', null, 5);
    await email('dee@example.org', 'SENT', 0.5, 0.5);
    await email('dee@example.org', 'QUEUED', null, 0);
  });

  test('email.<activity>: some email to the contact reached that state (when: sent_at, else updated_at)', async () => {
    const f = (field: string, operator: ConditionFilter['operator'], extra: Partial<ConditionFilter> = {}) => matching({ field, operator, ...extra });
    expect(await f('email.sent', 'triggered')).toEqual(['ann@example.org', 'bob@example.org', 'dee@example.org']);
    expect(await f('email.sent', 'notTriggered')).toEqual(['cy@example.org', 'eve@example.org', 'fay@example.org']);
    expect(await f('email.sent', 'triggeredWithin', { value: 3, unit: 'hours' })).toEqual(['bob@example.org', 'dee@example.org']);
    expect(await f('email.sent', 'triggeredOlderThan', { value: 1, unit: 'days' })).toEqual(['ann@example.org']);
    expect(await f('email.delivered', 'triggered')).toEqual(['ann@example.org', 'bob@example.org']);
    expect(await f('email.opened', 'triggered')).toEqual(['ann@example.org', 'bob@example.org']);
    expect(await f('email.opened', 'triggeredWithin', { value: 2, unit: 'hours' })).toEqual(['bob@example.org']);
    expect(await f('email.clicked', 'triggered')).toEqual(['ann@example.org']);
    expect(await f('email.bounced', 'triggered')).toEqual(['cy@example.org']);
    expect(await f('email.complained', 'triggered')).toEqual([]);
  });

  test('segment.<id>: static members, a dynamic segment’s condition, cycles and missing segments match nothing', async () => {
    const staticId = newId('seg');
    const dynamicId = newId('seg');
    const loopA = newId('seg');
    const loopB = newId('seg');
    const insert = (id: string, type: string, condition: unknown) =>
      query(em(), 'insert into segments (id, project_id, name, type, condition) values (?, ?, ?, ?, ?::jsonb)', [
        id,
        project.id,
        id,
        type,
        condition === null ? null : JSON.stringify(condition),
      ]);
    await insert(staticId, 'STATIC', null);
    await query(em(), 'insert into segment_members (segment_id, contact_id) values (?, ?), (?, ?)', [staticId, ids['bob@example.org'], staticId, ids['eve@example.org']]);
    await insert(dynamicId, 'DYNAMIC', { field: 'data.plan', operator: 'equals', value: 'pro' });
    await insert(loopA, 'DYNAMIC', { logic: 'OR', groups: [{ filters: [{ field: `segment.${loopB}`, operator: 'memberOfSegment' }] }, { filters: [{ field: 'email', operator: 'contains', value: 'ann' }] }] });
    await insert(loopB, 'DYNAMIC', { field: `segment.${loopA}`, operator: 'memberOfSegment' });

    expect(await matching({ field: `segment.${staticId}`, operator: 'memberOfSegment' })).toEqual(['bob@example.org', 'eve@example.org']);
    expect(await matching({ field: `segment.${staticId}`, operator: 'notMemberOfSegment' })).toEqual(['ann@example.org', 'cy@example.org', 'dee@example.org', 'fay@example.org']);
    expect(await matching({ field: `segment.${dynamicId}`, operator: 'memberOfSegment' })).toEqual(['ann@example.org', 'fay@example.org']);
    expect(await matching({ field: `segment.${dynamicId}`, operator: 'notMemberOfSegment' })).toEqual(['bob@example.org', 'cy@example.org', 'dee@example.org', 'eve@example.org']);
    // loopA = loopB OR ann; loopB = loopA: the cycle is cut where it closes, leaving ann.
    expect(await matching({ field: `segment.${loopA}`, operator: 'memberOfSegment' })).toEqual(['ann@example.org']);
    expect(await matching({ field: `segment.${loopB}`, operator: 'memberOfSegment' })).toEqual(['ann@example.org']);
    expect(await matching({ field: 'segment.seg_missing', operator: 'memberOfSegment' })).toEqual([]);
    expect(await matching({ field: 'segment.seg_missing', operator: 'notMemberOfSegment' })).toEqual([]);

    // segmentPredicate: the campaigns' audience, for both kinds.
    for (const [id, expected] of [
      [staticId, ['bob@example.org', 'eve@example.org']],
      [dynamicId, ['ann@example.org', 'fay@example.org']],
      [loopA, ['ann@example.org']],
    ] as const) {
      const members = await segmentPredicate(em(), project.id, id);
      const rows = await query<{ email: string }>(em(), `select email from contacts c where c.project_id = ? and (${members.sql}) order by email`, [
        project.id,
        ...members.params,
      ]);
      expect(rows.map((r) => r.email)).toEqual(expected);
    }
    await expect(segmentPredicate(em(), project.id, 'seg_missing')).rejects.toMatchObject({ status: 404 });
  });

  test('filters of the wrong kind for their field, or unknown fields, match nothing', async () => {
    expect(await matching({ field: 'event.purchase', operator: 'equals', value: 'x' })).toEqual([]);
    expect(await matching({ field: 'data.plan', operator: 'triggered' })).toEqual([]);
    expect(await matching({ field: 'email.read', operator: 'triggered' })).toEqual([]);
    expect(await matching({ field: 'name', operator: 'exists' })).toEqual([]);
  });
});

describe('contacts.event_ids: the event names a contact has triggered, kept in step with events', () => {
  const noRunner = { cancelJourney: async () => undefined, cancelCampaign: async () => undefined };

  /** Per contact of the project, the names its events have (truth) and the names event_ids says (summary). */
  async function truthAndSummary(projectId: string) {
    const truth = await query<{ id: string; names: string[] }>(
      em(),
      `select c.id, coalesce(array(select distinct e.name from events e where e.contact_id = c.id and e.project_id = c.project_id and e.name not like 'segment.%' order by 1), '{}') as names
       from contacts c where c.project_id = ? order by c.id`,
      [projectId],
    );
    const summary = await query<{ id: string; names: string[] }>(
      em(),
      `select c.id, coalesce(array(select r.name from event_name_ids r where r.project_id = c.project_id and r.id = any(c.event_ids) order by 1), '{}') as names
       from contacts c where c.project_id = ? order by c.id`,
      [projectId],
    );
    return { truth, summary };
  }

  async function expectInStep(projectId: string) {
    const { truth, summary } = await truthAndSummary(projectId);
    expect(summary).toEqual(truth);
  }

  async function membersOf(projectId: string, condition: Condition): Promise<string[]> {
    const ctx = await loadCompileContext(em(), projectId, [condition], NOW);
    const compiled = compileCondition(condition, ctx);
    // The summary is what answers, not a lookup in events (which would hide a summary out of step).
    expect(compiled.sql).not.toContain('from events');
    const rows = await query<{ email: string }>(em(), `select c.email from contacts c where c.project_id = ? and (${compiled.sql}) order by c.email`, [
      projectId,
      ...compiled.params,
    ]);
    return rows.map((r) => r.email);
  }

  test('bulk and single inserts, deletes of some events, of a whole name, of a contact, and a project reset', async () => {
    const p = await env.project('event ids');
    const contact = async (email: string) => {
      const id = newId('cnt');
      await query(em(), 'insert into contacts (id, project_id, email, subscribed) values (?, ?, ?, true)', [id, p.id, email]);
      return id;
    };
    const a = await contact('a@example.org');
    const b = await contact('b@example.org');
    const c = await contact('c@example.org');
    const insert = (rows: [string | null, string][]) =>
      query(
        em(),
        'insert into events (id, project_id, contact_id, name) select x.id, ?, x.contact_id, x.name from unnest(?::text[], ?::text[], ?::text[]) as x(id, contact_id, name)',
        [p.id, rows.map(() => newId('evt')), rows.map((r) => r[0]), rows.map((r) => r[1])],
      );
    // One statement: several names per contact, repeats, an event without a contact.
    await insert([
      [a, 'purchase'],
      [a, 'purchase'],
      [a, 'viewed'],
      [b, 'viewed'],
      [null, 'purchase'],
    ]);
    await insert([[b, 'purchase']]);
    await insert([[b, 'purchase']]); // a name b already has: no change
    await expectInStep(p.id);
    const triggered = (name: string) => membersOf(p.id, { field: `event.${name}`, operator: 'triggered' });
    const either: Condition = {
      logic: 'OR',
      groups: [{ filters: [{ field: 'event.viewed', operator: 'triggered' }] }, { filters: [{ field: 'email', operator: 'equals', value: 'c@example.org' }] }],
    };
    expect(await triggered('purchase')).toEqual(['a@example.org', 'b@example.org']);
    expect(await membersOf(p.id, { field: 'event.purchase', operator: 'notTriggered' })).toEqual(['c@example.org']);
    expect(await membersOf(p.id, either)).toEqual(['a@example.org', 'b@example.org', 'c@example.org']);
    expect(await triggered('never')).toEqual([]);
    // A tracked segment's entry / exit events are not numbered (one pair of names per segment): looked up in events.
    await insert([[b, 'segment.vip.entry']]);
    expect(await query(em(), `select 1 from event_name_ids where project_id = ? and name like 'segment.%'`, [p.id])).toEqual([]);
    const entered: Condition = { field: 'event.segment.vip.entry', operator: 'triggered' };
    const enteredSql = compileCondition(entered, await loadCompileContext(em(), p.id, [entered], NOW));
    expect(enteredSql.sql).toContain('from events');
    const enteredRows = await query<{ email: string }>(em(), `select c.email from contacts c where c.project_id = ? and (${enteredSql.sql})`, [
      p.id,
      ...enteredSql.params,
    ]);
    expect(enteredRows.map((r) => r.email)).toEqual(['b@example.org']);
    expect(await membersOf(p.id, { field: 'event.never', operator: 'notTriggered' })).toEqual(['a@example.org', 'b@example.org', 'c@example.org']);

    // One of a's two purchases goes: a still has one. Then b's only purchase: b has none, a keeps it.
    const [aPurchase] = await query<{ id: string }>(em(), `select id from events where contact_id = ? and name = 'purchase' limit 1`, [a]);
    await query(em(), 'delete from events where id = ?', [aPurchase!.id]);
    await query(em(), `delete from events where contact_id = ? and name = 'purchase'`, [b]);
    await expectInStep(p.id);
    expect(await triggered('purchase')).toEqual(['a@example.org']);

    // Every event of a name (db/events/events.ts): the name's number is retired; the name comes back with a new one.
    const [before] = await query<{ id: number }>(em(), `select id from event_name_ids where project_id = ? and name = 'viewed'`, [p.id]);
    expect(await deleteEventsByName(em(), p.id, 'viewed')).toBe(2);
    expect(await query(em(), `select 1 from event_name_ids where project_id = ? and name = 'viewed'`, [p.id])).toEqual([]);
    expect(await triggered('viewed')).toEqual([]);
    expect(await membersOf(p.id, either)).toEqual(['c@example.org']);
    await insert([[c, 'viewed']]);
    const [after] = await query<{ id: number }>(em(), `select id from event_name_ids where project_id = ? and name = 'viewed'`, [p.id]);
    expect(after!.id).not.toBe(before!.id);
    expect(await triggered('viewed')).toEqual(['c@example.org']);
    await expectInStep(p.id);

    // A contact deleted takes its events along; the others keep theirs.
    await query(em(), 'delete from contacts where id = ?', [a]);
    await insert([[b, 'purchase']]);
    expect(await triggered('purchase')).toEqual(['b@example.org']);
    await expectInStep(p.id);

    // A reset empties the project's names; events tracked afterwards count again.
    await resetProject(em(), p.id, 'event ids', noRunner);
    expect(await query(em(), 'select 1 from event_name_ids where project_id = ?', [p.id])).toEqual([]);
    const d = await contact('d@example.org');
    await insert([[d, 'purchase']]);
    expect(await triggered('purchase')).toEqual(['d@example.org']);
    await expectInStep(p.id);
  });

  test('the differential fixtures: event_ids says what their events say', async () => {
    await expectInStep(project.id);
  });
});

describe('typed slot columns (db/conditions/field-slots.ts) give the JSON expression’s answers', () => {
  test('the differential again, with the slots of the fields segments name ready', async () => {
    const slotted = ['data.plan', 'data.tags', 'data.code', 'data.mixed', 'data.seats', 'data.score', 'data.signupAt', 'data.renewsOn', 'data.when'];
    for (const field of slotted) {
      await query(em(), 'insert into segments (id, project_id, name, type, condition) values (?, ?, ?, ?, ?::jsonb)', [
        newId('seg'),
        project.id,
        `slot ${field}`,
        'DYNAMIC',
        JSON.stringify({ field, operator: 'exists' }),
      ]);
    }
    await prepareFieldSlots(em(), project.id);
    const ctx = await context();
    expect([...ctx.slots!.keys()].sort()).toEqual(slotted.map((f) => f.slice('data.'.length)).sort());
    // Each kind is used where it answers alone; a text field holding a list (tags) is not.
    const sqlOf = (filter: ConditionFilter) => compileCondition(filter, ctx).sql;
    expect(sqlOf({ field: 'data.plan', operator: 'equals', value: 'PRO' })).toMatch(/c\.slot_t\d = /);
    expect(sqlOf({ field: 'data.tags', operator: 'equals', value: 'vip' })).not.toContain('slot_');
    expect(sqlOf({ field: 'data.seats', operator: 'greaterThan', value: '5' })).toMatch(/c\.slot_n\d > /);
    expect(sqlOf({ field: 'data.signupAt', operator: 'within', value: 2, unit: 'days' })).toMatch(/c\.slot_d\d >= /);

    const filters: ConditionFilter[] = [];
    for (const field of slotted) {
      for (const operator of VALUE_OPERATORS) for (const value of VALUES) filters.push({ field, operator, value });
      for (const d of DURATIONS) filters.push({ field, operator: 'within', ...d }, { field, operator: 'olderThan', ...d });
    }
    expect(filters.filter((f) => sqlOf(f).includes('slot_')).length).toBeGreaterThan(300);
    await expectSameAsEvaluator(filters);
  });
});
