import type { FieldType } from '../entities/contact-field';

/**
 * How the condition language reads values (rules in evaluate.ts's header), shared by both
 * back-ends: evaluate.ts applies them to stored values, sql.ts to the condition's own value before
 * binding it (and migration 20261125030000's SQL helpers apply them to stored values there).
 */

// ---- Numbers and booleans --------------------------------------------------------------------------

const NUMERIC = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A finite number, or with coerceStrings a numeric string's number ("1e400" reads as Infinity). */
export function asNumber(x: unknown, coerceStrings: boolean): number | undefined {
  if (typeof x === 'number') return Number.isFinite(x) ? x : undefined;
  if (coerceStrings && typeof x === 'string' && NUMERIC.test(x.trim())) return Number(x.trim());
  return undefined;
}

export function asBoolean(x: unknown): boolean | undefined {
  if (typeof x === 'boolean') return x;
  if (typeof x === 'string') {
    const s = x.trim().toLowerCase();
    if (s === 'true') return true;
    if (s === 'false') return false;
  }
  return undefined;
}

/** "Missing" is undefined or null. */
export const isMissing = (x: unknown): x is null | undefined => x === undefined || x === null;

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
export function parseDateValue(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = DATE_ONLY.exec(value);
  if (m) return utcDay(Number(m[1]), Number(m[2]), Number(m[3]));
  return parseFullIsoDateTime(value);
}

/** A value as an instant by the field type's rule: a date field's values, else full ISO date-times only. */
export const parseDate = (value: unknown, fieldType: FieldType | undefined) =>
  fieldType === 'date' ? parseDateValue(value) : parseFullIsoDateTime(value);

// ---- Dotted paths ----------------------------------------------------------------------------------

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

/**
 * The ways readPath may find a dotted path, in its order: at each level the longest key made of
 * the next segments first. Each is a key list (for SQL's `#>`, which also indexes arrays).
 */
export function keyPaths(segments: string[]): string[][] {
  if (segments.length === 0) return [[]];
  const out: string[][] = [];
  for (let n = segments.length; n >= 1; n--) {
    const key = segments.slice(0, n).join('.');
    for (const rest of keyPaths(segments.slice(n))) out.push([key, ...rest]);
  }
  return out;
}
