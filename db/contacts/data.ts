import type { JsonValue } from '../entities/contact';
import type { FieldType } from '../entities/contact-field';

/**
 * Keys that never land in `data` (docs/design.md, `data` rules). The core fields live
 * outside `data` and change only through their own request fields, so they are dropped too.
 */
export const RESERVED_DATA_KEYS: ReadonlySet<string> = new Set([
  'id',
  'svc_id',
  'svc_email',
  'email',
  'unsubscribeUrl',
  'subscribeUrl',
  'manageUrl',
  'subscribed',
  'createdAt',
  'updatedAt',
]);

export interface DataPatch {
  /** Keys to store (merged over the existing data). */
  set: Record<string, JsonValue>;
  /** Keys to remove (`null` was sent). */
  remove: string[];
  /** `{value, persistent: false}`: usable for this request only, never stored. */
  transient: Record<string, JsonValue>;
}

function isPersistenceWrapper(v: unknown): v is { value: JsonValue; persistent?: boolean } {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  return 'value' in v && 'persistent' in v && keys.every((k) => k === 'value' || k === 'persistent');
}

/** `obj[key] = v` with key "__proto__" would replace the prototype instead of storing the key. */
function setOwn(obj: Record<string, JsonValue>, key: string, value: JsonValue): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Turns a request's `data` into what to store, remove and use only once. */
export function planDataPatch(data: Record<string, unknown> | undefined): DataPatch {
  const patch: DataPatch = { set: {}, remove: [], transient: {} };
  for (const [key, value] of Object.entries(data ?? {})) {
    if (RESERVED_DATA_KEYS.has(key) || value === undefined || value === '') continue;
    if (value === null) {
      patch.remove.push(key);
    } else if (isPersistenceWrapper(value)) {
      if (value.persistent === false) setOwn(patch.transient, key, value.value);
      else if (value.value === null) patch.remove.push(key);
      else if (value.value !== '') setOwn(patch.set, key, value.value);
    } else {
      setOwn(patch.set, key, value as JsonValue);
    }
  }
  return patch;
}

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

/**
 * Date.parse rolls impossible days over (2024-02-30 becomes March 1st), so the day must come
 * back unchanged: a "date" field must hold values a segment can compare as dates.
 */
function isRealDate(s: string): boolean {
  const day = s.slice(0, 10);
  const dayMs = Date.parse(`${day}T00:00:00Z`);
  if (Number.isNaN(dayMs) || new Date(dayMs).toISOString().slice(0, 10) !== day) return false;
  return !Number.isNaN(Date.parse(s));
}

/** The type a key gets the first time a non-null value is seen (docs/design.md, `data` rules). */
export function inferFieldType(value: JsonValue): FieldType {
  if (typeof value === 'number') return 'number';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'string' && (DATE_ONLY.test(value) || DATE_TIME_UTC.test(value)) && isRealDate(value)) {
    return 'date';
  }
  return 'string';
}
