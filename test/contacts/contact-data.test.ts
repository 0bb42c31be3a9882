import { RESERVED_DATA_KEYS, inferFieldType, planDataPatch } from '../../db/contacts/data';

// Pure `data` rules (docs/design.md); the HTTP tests (contacts, fields) check the same
// rules end to end.

describe('planDataPatch', () => {
  test('no data, or an empty object, changes nothing', () => {
    const empty = { set: {}, remove: [], transient: {} };
    expect(planDataPatch(undefined)).toEqual(empty);
    expect(planDataPatch({})).toEqual(empty);
  });

  test('primitives are stored; null removes; "" is ignored', () => {
    expect(planDataPatch({ plan: 'pro', seats: 3, trial: false, zero: 0, gone: null, blank: '' })).toEqual({
      set: { plan: 'pro', seats: 3, trial: false, zero: 0 },
      remove: ['gone'],
      transient: {},
    });
  });

  test('{value, persistent:false} is transient; {value, persistent:true} is stored unwrapped', () => {
    expect(
      planDataPatch({
        code: { value: '123456', persistent: false },
        link: { value: 'https://x.io/a', persistent: true },
        blankKept: { value: '', persistent: true },
        nulled: { value: null, persistent: true },
      }),
    ).toEqual({
      set: { link: 'https://x.io/a' },
      remove: ['nulled'],
      transient: { code: '123456' },
    });
  });

  test('an object that merely has a value key (or more keys) is ordinary nested data', () => {
    const nested = { address: { city: 'Paris', geo: { lat: 48.85 } }, box: { value: 1 }, extra: { value: 1, persistent: false, x: 2 } };
    expect(planDataPatch(nested)).toEqual({ set: nested, remove: [], transient: {} });
  });

  test('arrays are stored as-is', () => {
    expect(planDataPatch({ tags: ['a', 'b'] }).set).toEqual({ tags: ['a', 'b'] });
  });

  test('every reserved key is dropped, whatever its value, and locale is kept', () => {
    const reserved = ['id', 'svc_id', 'svc_email', 'email', 'unsubscribeUrl', 'subscribeUrl', 'manageUrl', 'subscribed', 'createdAt', 'updatedAt'];
    expect([...RESERVED_DATA_KEYS].sort()).toEqual([...reserved].sort());
    const data: Record<string, unknown> = { locale: 'fr' };
    for (const k of reserved) data[k] = 'x';
    data.email = null; // a null on a reserved key must not become a removal either
    data.id = { value: 'y', persistent: false };
    expect(planDataPatch(data)).toEqual({ set: { locale: 'fr' }, remove: [], transient: {} });
  });
});

describe('inferFieldType', () => {
  test.each([
    [42, 'number'],
    [0, 'number'],
    [-1.5, 'number'],
    [true, 'boolean'],
    [false, 'boolean'],
    ['2024-01-31', 'date'],
    ['2024-01-31T10:20:30Z', 'date'],
    ['2024-01-31T10:20:30.1Z', 'date'],
    ['2024-01-31T10:20:30.123Z', 'date'],
    ['2024-02-29', 'date'],
    ['01/31/2024', 'string'],
    ['2024-13-45', 'string'],
    ['2024-13-01', 'string'],
    ['2024-02-30', 'string'],
    ['2023-02-29T00:00:00Z', 'string'],
    ['2024-04-31T12:00:00Z', 'string'],
    ['2024-01-31T25:00:00Z', 'string'],
    ['2024-01-31T10:20:30+02:00', 'string'],
    ['2024-01-31T10:20:30', 'string'],
    ['2024-01-31T10:20:30.1234Z', 'string'],
    ['2024-1-31', 'string'],
    [' 2024-01-31', 'string'],
    ['42', 'string'],
    ['true', 'string'],
    ['hello', 'string'],
    [['a'], 'string'],
    [{ a: 1 }, 'string'],
  ] as const)('%j → %s', (value, type) => {
    expect(inferFieldType(value as never)).toBe(type);
  });
});
