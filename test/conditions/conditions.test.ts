import { type ConditionInput, evaluateCondition } from '../../db/conditions/evaluate';
import { parseFullIsoDateTime, readPath } from '../../db/conditions/values';
import { upsertContact } from '../../db/contacts/contacts';
import { recordEvent } from '../../db/events/events';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { type StepConfigs, stepConfigSchemas } from '../../db/journeys/steps';
import { createConditionActivities } from '../../temporal/journeys/condition-activities';
import { startTestEnv, type TestEnv } from '../helpers/env';

type Condition = StepConfigs['CONDITION'];

const NOW = new Date('2025-06-15T12:00:00.000Z');
const contact = {
  email: 'Ann@Example.org',
  subscribed: true,
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
    empty: null,
    items: [{ sku: 'A1' }, { sku: 'B2' }],
  } as Record<string, unknown>,
};
const context = { orderId: 'ord_1', amount: 99.5, amountText: '99.5', cart: { items: 3, coupon: null }, paidAt: '2025-06-15T13:30:00+02:00' };

/** Builds the input; the condition goes through the real schema, as the engine's would. */
function check(condition: Partial<Condition> & { field: string; operator: Condition['operator'] }, extra: Partial<ConditionInput> = {}) {
  const parsed = stepConfigSchemas.CONDITION.parse(condition);
  return evaluateCondition({ contact, context, condition: parsed, now: NOW, ...extra });
}

describe('readPath', () => {
  test('nested objects, literal dotted keys, array indexes, own properties only', () => {
    expect(readPath(contact.data, 'address.city')).toBe('Paris');
    expect(readPath(contact.data, 'address.geo.lat')).toBe(48.85);
    expect(readPath(contact.data, 'utm.source')).toBe('newsletter');
    expect(readPath(contact.data, 'items.1.sku')).toBe('B2');
    expect(readPath(contact.data, 'items.5.sku')).toBeUndefined();
    expect(readPath(contact.data, 'address.zip')).toBeUndefined();
    expect(readPath(contact.data, '__proto__')).toBeUndefined();
    expect(readPath(contact.data, 'plan.length')).toBeUndefined();
    expect(readPath({ a: { 'b.c': 1 }, 'a.b': { c: 2 } }, 'a.b.c')).toBe(2);
  });
});

describe('parseFullIsoDateTime', () => {
  test('needs date, time and Z or an offset; impossible dates are refused', () => {
    expect(parseFullIsoDateTime('2025-06-15T12:00:00Z')).toBe(NOW.getTime());
    expect(parseFullIsoDateTime('2025-06-15T12:00:00.000Z')).toBe(NOW.getTime());
    expect(parseFullIsoDateTime('2025-06-15T14:00:00+02:00')).toBe(NOW.getTime());
    expect(parseFullIsoDateTime('2025-06-15T07:30-0430')).toBe(NOW.getTime());
    expect(parseFullIsoDateTime('2025-06-15')).toBeUndefined();
    expect(parseFullIsoDateTime('2025-06-15T12:00:00')).toBeUndefined(); // no zone
    expect(parseFullIsoDateTime('06/15/2025')).toBeUndefined();
    expect(parseFullIsoDateTime('2025-02-30T00:00:00Z')).toBeUndefined();
    expect(parseFullIsoDateTime('2025-06-15T24:00:00Z')).toBeUndefined();
    expect(parseFullIsoDateTime(1718452800000)).toBeUndefined();
  });
});

describe('evaluateCondition: fields', () => {
  test('contact.email and contact.subscribed', () => {
    expect(check({ field: 'contact.email', operator: 'equals', value: 'ann@example.org' })).toBe(true);
    expect(check({ field: 'contact.email', operator: 'contains', value: 'EXAMPLE' })).toBe(true);
    expect(check({ field: 'contact.email', operator: 'notContains', value: 'gmail' })).toBe(true);
    expect(check({ field: 'contact.subscribed', operator: 'equals', value: true })).toBe(true);
    expect(check({ field: 'contact.subscribed', operator: 'equals', value: 'true' })).toBe(true);
    expect(check({ field: 'contact.subscribed', operator: 'equals', value: false })).toBe(false);
    expect(check({ field: 'contact.subscribed', operator: 'notEquals', value: false })).toBe(true);
    expect(check({ field: 'contact.subscribed', operator: 'exists' })).toBe(true);
    // A boolean has no order; a declared field type can't change a core field's type.
    expect(check({ field: 'contact.subscribed', operator: 'gt', value: 0 })).toBe(false);
    expect(check({ field: 'contact.email', operator: 'gt', value: 'a' }, { fieldType: 'number' })).toBe(true);
  });

  test('data.<path> reads the contact data, nested and dotted', () => {
    expect(check({ field: 'data.plan', operator: 'equals', value: 'pro' })).toBe(true);
    expect(check({ field: 'data.address.city', operator: 'equals', value: 'PARIS' })).toBe(true);
    expect(check({ field: 'data.address.geo.lat', operator: 'gt', value: 48 })).toBe(true);
    expect(check({ field: 'data.utm.source', operator: 'equals', value: 'newsletter' })).toBe(true);
    expect(check({ field: 'data.items.0.sku', operator: 'equals', value: 'a1' })).toBe(true);
  });

  test('event.<path> reads the execution context, not the contact', () => {
    expect(check({ field: 'event.orderId', operator: 'equals', value: 'ORD_1' })).toBe(true);
    expect(check({ field: 'event.cart.items', operator: 'greaterThanOrEqual', value: 3 })).toBe(true);
    expect(check({ field: 'event.plan', operator: 'exists' })).toBe(false);
    expect(check({ field: 'data.orderId', operator: 'exists' })).toBe(false);
  });
});

describe('evaluateCondition: missing fields', () => {
  const ops: Condition['operator'][] = ['equals', 'notEquals', 'contains', 'notContains', 'gt', 'lt', 'greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual'];
  test.each(['data.nope', 'data.empty', 'event.cart.coupon', 'event.nope.deeper'])('%s (absent or null) matches no comparison, only notExists', (field) => {
    for (const operator of ops) expect([operator, check({ field, operator, value: 'x' })]).toEqual([operator, false]);
    for (const operator of ops) expect([operator, check({ field, operator, value: 1 })]).toEqual([operator, false]);
    expect(check({ field, operator: 'within', value: 1, unit: 'days' })).toBe(false);
    expect(check({ field, operator: 'olderThan', value: 1, unit: 'days' })).toBe(false);
    expect(check({ field, operator: 'exists' })).toBe(false);
    expect(check({ field, operator: 'notExists' })).toBe(true);
  });

  test('present values exist, including false and 0', () => {
    expect(check({ field: 'data.trial', operator: 'exists' })).toBe(true);
    expect(check({ field: 'data.trial', operator: 'notExists' })).toBe(false);
    expect(check({ field: 'data.zero', operator: 'exists' }, { contact: { ...contact, data: { zero: 0 } } })).toBe(true);
  });
});

describe('evaluateCondition: equals / notEquals / contains / notContains', () => {
  test('strings: case-insensitive', () => {
    expect(check({ field: 'data.plan', operator: 'equals', value: 'PRO' })).toBe(true);
    expect(check({ field: 'data.plan', operator: 'equals', value: 'Pr' })).toBe(false);
    expect(check({ field: 'data.plan', operator: 'notEquals', value: 'pro' })).toBe(false);
    expect(check({ field: 'data.plan', operator: 'notEquals', value: 'free' })).toBe(true);
    expect(check({ field: 'data.plan', operator: 'contains', value: 'R' })).toBe(true);
    expect(check({ field: 'data.plan', operator: 'notContains', value: 'r' })).toBe(false);
    expect(check({ field: 'data.plan', operator: 'notContains', value: 'team' })).toBe(true);
  });

  test('arrays: element match', () => {
    expect(check({ field: 'data.tags', operator: 'contains', value: 'vip' })).toBe(true);
    expect(check({ field: 'data.tags', operator: 'contains', value: 'vi' })).toBe(false); // an element, not a substring
    expect(check({ field: 'data.tags', operator: 'notContains', value: 'vip' })).toBe(false);
    expect(check({ field: 'data.tags', operator: 'notContains', value: 'alpha' })).toBe(true);
    expect(check({ field: 'data.tags', operator: 'equals', value: 'BETA' })).toBe(true);
    expect(check({ field: 'data.tags', operator: 'notEquals', value: 'beta' })).toBe(false);
    expect(check({ field: 'data.nums', operator: 'contains', value: 2 })).toBe(true);
    expect(check({ field: 'data.nums', operator: 'contains', value: '2' })).toBe(true);
    expect(check({ field: 'data.nums', operator: 'gt', value: 0 })).toBe(false); // arrays don't order
  });

  test('numbers and booleans', () => {
    expect(check({ field: 'data.seats', operator: 'equals', value: 12 })).toBe(true);
    expect(check({ field: 'data.seats', operator: 'equals', value: '12' })).toBe(true); // the condition value is coerced
    expect(check({ field: 'data.seats', operator: 'equals', value: '12.0' })).toBe(true);
    expect(check({ field: 'data.seats', operator: 'equals', value: 'twelve' })).toBe(false);
    expect(check({ field: 'data.seats', operator: 'notEquals', value: 13 })).toBe(true);
    expect(check({ field: 'data.seats', operator: 'contains', value: '1' })).toBe(true);
    expect(check({ field: 'data.trial', operator: 'equals', value: false })).toBe(true);
    expect(check({ field: 'data.trial', operator: 'equals', value: 'FALSE' })).toBe(true);
    expect(check({ field: 'data.trial', operator: 'equals', value: 0 })).toBe(false);
  });

  test('numeric strings: compared as text unless the field type is number', () => {
    expect(check({ field: 'data.scoreText', operator: 'equals', value: 42 })).toBe(true); // same text
    expect(check({ field: 'data.scoreText', operator: 'equals', value: '42.0' })).toBe(false);
    expect(check({ field: 'data.scoreText', operator: 'equals', value: '42.0' }, { fieldType: 'number' })).toBe(true);
  });

  test('dates: equal instants in different spellings', () => {
    expect(check({ field: 'data.signupAt', operator: 'equals', value: '2025-06-14T14:00:00+02:00' })).toBe(true);
    expect(check({ field: 'data.renewsOn', operator: 'equals', value: '2025-07-01T00:00:00Z' })).toBe(false);
    expect(check({ field: 'data.renewsOn', operator: 'equals', value: '2025-07-01T00:00:00Z' }, { fieldType: 'date' })).toBe(true);
  });

  test('objects match nothing but exists', () => {
    for (const operator of ['equals', 'notEquals', 'contains', 'notContains', 'gt'] as const) {
      expect(check({ field: 'data.address', operator, value: 'Paris' })).toBe(false);
    }
    expect(check({ field: 'data.address', operator: 'exists' })).toBe(true);
  });
});

describe('evaluateCondition: ordering (type-aware)', () => {
  test('numbers compare as numbers; aliases gt / lt', () => {
    expect(check({ field: 'data.seats', operator: 'greaterThan', value: 9 })).toBe(true);
    expect(check({ field: 'data.seats', operator: 'gt', value: 12 })).toBe(false);
    expect(check({ field: 'data.seats', operator: 'greaterThanOrEqual', value: 12 })).toBe(true);
    expect(check({ field: 'data.seats', operator: 'lessThan', value: 100 })).toBe(true); // not "12" < "100" as text
    expect(check({ field: 'data.seats', operator: 'lt', value: 12 })).toBe(false);
    expect(check({ field: 'data.seats', operator: 'lessThanOrEqual', value: 12 })).toBe(true);
    expect(check({ field: 'data.seats', operator: 'gt', value: '9' })).toBe(true); // the value is coerced
    expect(check({ field: 'data.seats', operator: 'gt', value: 'nine' })).toBe(false);
    expect(check({ field: 'event.amount', operator: 'gt', value: 99 })).toBe(true);
  });

  test('a numeric string is a number only when the project types the field number', () => {
    // Typed string (or unknown): text against a number does not order, text against text orders as text.
    expect(check({ field: 'data.scoreText', operator: 'gt', value: 5 })).toBe(false);
    expect(check({ field: 'data.scoreText', operator: 'gt', value: 5 }, { fieldType: 'string' })).toBe(false);
    expect(check({ field: 'data.scoreText', operator: 'gt', value: '5' })).toBe(false); // "42" < "5" as text
    expect(check({ field: 'event.amountText', operator: 'gt', value: 100 })).toBe(false);
    // Typed number: coerced.
    expect(check({ field: 'data.scoreText', operator: 'gt', value: 5 }, { fieldType: 'number' })).toBe(true);
    expect(check({ field: 'data.scoreText', operator: 'gt', value: '5' }, { fieldType: 'number' })).toBe(true);
    expect(check({ field: 'data.scoreText', operator: 'lessThanOrEqual', value: 42 }, { fieldType: 'number' })).toBe(true);
    expect(check({ field: 'data.plan', operator: 'gt', value: 5 }, { fieldType: 'number' })).toBe(false);
    expect(check({ field: 'data.plan', operator: 'gt', value: 'a' }, { fieldType: 'number' })).toBe(false);
  });

  test('dates compare as dates: field type date, or full ISO on both sides', () => {
    // Both full ISO with different offsets: as instants (text order would say the opposite).
    expect(check({ field: 'data.signupAt', operator: 'gt', value: '2025-06-14T13:00:00+02:00' })).toBe(true);
    expect(check({ field: 'data.signupAt', operator: 'lt', value: '2025-06-14T13:00:00+02:00' })).toBe(false);
    expect(check({ field: 'event.paidAt', operator: 'lt', value: '2025-06-15T12:00:00Z' })).toBe(true); // 11:30Z
    expect(check({ field: 'event.paidAt', operator: 'gt', value: '2025-06-15T12:00:00+01:00' })).toBe(true);
    // Date type: a date-only value compares with a date-time.
    expect(check({ field: 'data.renewsOn', operator: 'gt', value: '2025-06-30T23:59:59Z' }, { fieldType: 'date' })).toBe(true);
    expect(check({ field: 'data.renewsOn', operator: 'lessThanOrEqual', value: '2025-07-01' }, { fieldType: 'date' })).toBe(true);
    // Date type: something that isn't a date never orders.
    expect(check({ field: 'data.usDate', operator: 'gt', value: '2000-01-01' }, { fieldType: 'date' })).toBe(false);
    expect(check({ field: 'data.renewsOn', operator: 'gt', value: 'garbage' }, { fieldType: 'date' })).toBe(false);
    expect(check({ field: 'data.renewsOn', operator: 'gt', value: 20250101 }, { fieldType: 'date' })).toBe(false);
  });

  test('strings order case-insensitively; mixed types and booleans never order', () => {
    expect(check({ field: 'data.plan', operator: 'gt', value: 'basic' })).toBe(true);
    expect(check({ field: 'data.plan', operator: 'gt', value: 'PRO' })).toBe(false);
    expect(check({ field: 'data.plan', operator: 'greaterThanOrEqual', value: 'PRO' })).toBe(true);
    expect(check({ field: 'data.trial', operator: 'lt', value: true })).toBe(false);
    expect(check({ field: 'data.seats', operator: 'lt', value: true })).toBe(false);
  });
});

describe('evaluateCondition: within / olderThan', () => {
  const at = (iso: string) => ({ contact: { ...contact, data: { ts: iso } } });
  test('full ISO date-times only', () => {
    expect(check({ field: 'data.signupAt', operator: 'within', value: 2, unit: 'days' })).toBe(true);
    expect(check({ field: 'data.signupAt', operator: 'within', value: 23, unit: 'hours' })).toBe(false);
    expect(check({ field: 'data.signupAt', operator: 'olderThan', value: 23, unit: 'hours' })).toBe(true);
    expect(check({ field: 'data.signupAt', operator: 'olderThan', value: 1441, unit: 'minutes' })).toBe(false);
    expect(check({ field: 'event.paidAt', operator: 'within', value: 31, unit: 'minutes' })).toBe(true);
    expect(check({ field: 'event.paidAt', operator: 'within', value: 29, unit: 'minutes' })).toBe(false);
    expect(check({ field: 'data.ts', operator: 'within', value: 10, unit: 'minutes' }, at('2025-06-15T11:55:00.123Z'))).toBe(true);
    expect(check({ field: 'data.ts', operator: 'within', value: 1, unit: 'days' }, at('2025-06-15T13:00+01:00'))).toBe(true);
  });

  test('boundaries: within includes the cutoff, olderThan is strictly before it; a future date is within', () => {
    expect(check({ field: 'data.ts', operator: 'within', value: 1, unit: 'hours' }, at('2025-06-15T11:00:00Z'))).toBe(true);
    expect(check({ field: 'data.ts', operator: 'olderThan', value: 1, unit: 'hours' }, at('2025-06-15T11:00:00Z'))).toBe(false);
    expect(check({ field: 'data.ts', operator: 'within', value: 1, unit: 'hours' }, at('2025-06-20T00:00:00Z'))).toBe(true);
    expect(check({ field: 'data.ts', operator: 'olderThan', value: 1, unit: 'hours' }, at('2025-06-20T00:00:00Z'))).toBe(false);
  });

  test('YYYY-MM-DD, US dates, zoneless times, numbers and arrays never match, whatever the field type', () => {
    for (const fieldType of [undefined, 'date', 'string'] as const) {
      for (const operator of ['within', 'olderThan'] as const) {
        const big = { field: 'data.ts', operator, value: 100_000, unit: 'days' } as const;
        expect(check({ ...big, field: 'data.renewsOn' }, { fieldType })).toBe(false);
        expect(check({ ...big, field: 'data.usDate' }, { fieldType })).toBe(false);
        expect(check(big, { fieldType, ...at('2025-06-15T11:00:00') })).toBe(false);
        expect(check(big, { fieldType, contact: { ...contact, data: { ts: NOW.getTime() } } })).toBe(false);
        expect(check(big, { fieldType, contact: { ...contact, data: { ts: ['2025-06-15T11:00:00Z'] } } })).toBe(false);
        expect(check({ ...big, field: 'data.plan' }, { fieldType })).toBe(false);
      }
    }
  });
});

describe('evaluateCondition: triggered operators', () => {
  const times = [new Date('2025-06-01T12:00:00Z'), new Date('2025-06-15T11:00:00Z')];
  test('triggered / notTriggered', () => {
    expect(check({ field: 'event.purchase', operator: 'triggered' }, { eventTimes: times })).toBe(true);
    expect(check({ field: 'event.purchase', operator: 'notTriggered' }, { eventTimes: times })).toBe(false);
    expect(check({ field: 'event.purchase', operator: 'triggered' }, { eventTimes: [] })).toBe(false);
    expect(check({ field: 'event.purchase', operator: 'notTriggered' }, { eventTimes: [] })).toBe(true);
    expect(check({ field: 'event.purchase', operator: 'notTriggered' })).toBe(true); // no times given = none
  });

  test('triggeredWithin / triggeredOlderThan: some event in / before the window', () => {
    expect(check({ field: 'event.purchase', operator: 'triggeredWithin', value: 2, unit: 'hours' }, { eventTimes: times })).toBe(true);
    expect(check({ field: 'event.purchase', operator: 'triggeredWithin', value: 30, unit: 'minutes' }, { eventTimes: times })).toBe(false);
    expect(check({ field: 'event.purchase', operator: 'triggeredOlderThan', value: 7, unit: 'days' }, { eventTimes: times })).toBe(true);
    expect(check({ field: 'event.purchase', operator: 'triggeredOlderThan', value: 30, unit: 'days' }, { eventTimes: times })).toBe(false);
    expect(check({ field: 'event.purchase', operator: 'triggeredWithin', value: 1, unit: 'days' }, { eventTimes: [] })).toBe(false);
    expect(check({ field: 'event.purchase', operator: 'triggeredOlderThan', value: 1, unit: 'days' }, { eventTimes: [] })).toBe(false);
  });

  test('event names may contain dots; a non-event field never matches', () => {
    expect(check({ field: 'event.email.opened', operator: 'triggered' }, { eventTimes: times })).toBe(true);
    expect(check({ field: 'data.plan', operator: 'triggered' }, { eventTimes: times })).toBe(false);
    expect(check({ field: 'contact.email', operator: 'notTriggered' }, { eventTimes: [] })).toBe(false);
  });
});

describe('evaluateCondition activity (real database)', () => {
  let env: TestEnv;
  let project: ProjectWithKeys;
  let other: ProjectWithKeys;
  let activities: ReturnType<typeof createConditionActivities>;
  let ann: string;
  let bob: string;

  beforeAll(async () => {
    env = await startTestEnv();
    project = await env.project('conditions');
    other = await env.project('conditions other');
    activities = createConditionActivities({ orm: env.orm });
    const em = env.orm.em.fork();
    // "score" is typed number by its first value; a later string value keeps that type.
    ann = (await upsertContact(em, project.id, { email: 'ann@example.org', data: { score: 5, plan: 'pro', joinedAt: '2025-01-01T00:00:00Z' } }, { subscribedWhenNew: true })).contact.id;
    bob = (await upsertContact(em, project.id, { email: 'bob@example.org', data: { score: '42', code: '007' } }, { subscribedWhenNew: false })).contact.id;
    // In the other project "code" is typed number first; it must not leak into this one.
    await upsertContact(em, other.id, { email: 'x@example.org', data: { code: 1 } }, { subscribedWhenNew: true });
    await recordEvent(em, project.id, ann, 'purchase', { amount: 10 });
    const old = await recordEvent(em, project.id, ann, 'purchase', { amount: 20 });
    await query(em, `update events set created_at = now() - interval '10 days' where id = ?`, [old.id]);
    await recordEvent(em, project.id, bob, 'viewed');
    await recordEvent(em, other.id, null, 'purchase');
  });

  afterAll(() => env.close());

  const run = (contactId: string, condition: Condition, context: Record<string, unknown> = {}, projectId = project.id) =>
    activities.evaluateCondition({ projectId, contactId, condition: stepConfigSchemas.CONDITION.parse(condition), context });

  test('reads the contact fresh on every call', async () => {
    expect(await run(ann, { field: 'data.plan', operator: 'equals', value: 'PRO' })).toEqual({ result: true });
    await upsertContact(env.orm.em.fork(), project.id, { email: 'ann@example.org', data: { plan: 'team' } }, { subscribedWhenNew: true });
    expect(await run(ann, { field: 'data.plan', operator: 'equals', value: 'pro' })).toEqual({ result: false });
    expect(await run(ann, { field: 'contact.subscribed', operator: 'equals', value: true })).toEqual({ result: true });
    expect(await run(bob, { field: 'contact.subscribed', operator: 'equals', value: true })).toEqual({ result: false });
    expect(await run(bob, { field: 'contact.email', operator: 'contains', value: 'BOB' })).toEqual({ result: true });
  });

  test("uses the project's field type: a numeric string on a number field compares as a number", async () => {
    // bob.score = "42" (string) but the project typed score as number (ann's 5 came first).
    expect(await run(bob, { field: 'data.score', operator: 'gt', value: 9 })).toEqual({ result: true });
    // code was first seen here as "007": a string field, so no coercion.
    expect(await run(bob, { field: 'data.code', operator: 'gt', value: 1 })).toEqual({ result: false });
    expect(await run(bob, { field: 'data.code', operator: 'equals', value: '007' })).toEqual({ result: true });
  });

  test('event.* reads the context passed in', async () => {
    expect(await run(ann, { field: 'event.total', operator: 'gt', value: 50 }, { total: 75 })).toEqual({ result: true });
    expect(await run(ann, { field: 'event.total', operator: 'gt', value: 50 }, {})).toEqual({ result: false });
    expect(await run(ann, { field: 'data.joinedAt', operator: 'olderThan', value: 1, unit: 'days' })).toEqual({ result: true });
  });

  test('triggered operators use the contact\'s own events of that name', async () => {
    expect(await run(ann, { field: 'event.purchase', operator: 'triggered' })).toEqual({ result: true });
    expect(await run(bob, { field: 'event.purchase', operator: 'triggered' })).toEqual({ result: false });
    expect(await run(bob, { field: 'event.purchase', operator: 'notTriggered' })).toEqual({ result: true });
    expect(await run(bob, { field: 'event.viewed', operator: 'triggeredWithin', value: 5, unit: 'minutes' })).toEqual({ result: true });
    expect(await run(ann, { field: 'event.purchase', operator: 'triggeredWithin', value: 1, unit: 'hours' })).toEqual({ result: true });
    expect(await run(ann, { field: 'event.purchase', operator: 'triggeredOlderThan', value: 7, unit: 'days' })).toEqual({ result: true });
    expect(await run(ann, { field: 'event.purchase', operator: 'triggeredOlderThan', value: 11, unit: 'days' })).toEqual({ result: false });
    expect(await run(bob, { field: 'event.viewed', operator: 'triggeredOlderThan', value: 1, unit: 'hours' })).toEqual({ result: false });
  });

  test('a missing contact, or one of another project, gives false', async () => {
    expect(await run('cnt_missing', { field: 'data.plan', operator: 'notExists' })).toEqual({ result: false });
    expect(await run(ann, { field: 'contact.email', operator: 'exists' }, {}, other.id)).toEqual({ result: false });
  });

  test('an invalid config fails without retries', async () => {
    await expect(
      activities.evaluateCondition({ projectId: project.id, contactId: ann, condition: { field: 'name', operator: 'equals', value: 'x' }, context: {} }),
    ).rejects.toMatchObject({ type: 'InvalidStepConfig', nonRetryable: true });
  });
});
