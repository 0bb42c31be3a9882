import type { JsonValue } from '../entities/contact';
import type { FieldType } from '../entities/contact-field';
import { RESERVED_DATA_KEYS } from './data';

/**
 * CSV import typing (docs/design.md, CSV import): a cell's type comes from its content. Differs from the JSON
 * inference (db/contacts/data.ts): a CSV cell is always text, so numbers and booleans are
 * recognised here, and values a spreadsheet would mangle (007, +44…, 1e5) stay strings.
 */

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
/** Plain integers and decimals; no leading zero (except "0" / "0.x"), no plus sign, no exponent. */
const PLAIN_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?$/;

function isRealTimestamp(s: string): boolean {
  const day = s.slice(0, 10);
  const dayMs = Date.parse(`${day}T00:00:00Z`);
  if (Number.isNaN(dayMs) || new Date(dayMs).toISOString().slice(0, 10) !== day) return false;
  return !Number.isNaN(Date.parse(s));
}

export interface TypedCell {
  value: JsonValue;
  type: FieldType;
}

/** Types one non-empty, trimmed cell. */
export function typeCsvCell(cell: string): TypedCell {
  const lower = cell.toLowerCase();
  if (lower === 'true' || lower === 'yes') return { value: true, type: 'boolean' };
  if (lower === 'false' || lower === 'no') return { value: false, type: 'boolean' };
  if (PLAIN_NUMBER.test(cell)) {
    const n = Number(cell);
    if (Number.isFinite(n)) return { value: n, type: 'number' };
  }
  if (ISO_TIMESTAMP.test(cell) && isRealTimestamp(cell)) return { value: cell, type: 'date' };
  return { value: cell, type: 'string' };
}

export interface CsvColumns {
  /** Index of the email column. */
  emailIndex: number;
  /** Data columns: index in the record → data key. Reserved columns are left out. */
  data: { index: number; key: string }[];
}

/**
 * Reads the header row: `email` matched case-insensitively and trimmed; every other named,
 * non-reserved column becomes `data.<column>` (the first of two same-named columns wins).
 * Returns a reason string when the file cannot be imported at all.
 */
export function planColumns(header: string[]): CsvColumns | { error: string } {
  const names = header.map((h) => h.trim());
  const emailIndex = names.findIndex((n) => n.toLowerCase() === 'email');
  if (emailIndex < 0) {
    return { error: `The header row has no "email" column (columns found: ${names.filter(Boolean).join(', ') || 'none'})` };
  }
  const seen = new Set<string>();
  const data: CsvColumns['data'] = [];
  names.forEach((key, index) => {
    if (index === emailIndex || key === '' || RESERVED_DATA_KEYS.has(key) || seen.has(key)) return;
    if (key.toLowerCase() === 'email') return;
    seen.add(key);
    data.push({ index, key });
  });
  return { emailIndex, data };
}

/** The typed `data` of one record; empty cells are left out (they never erase a value). */
export function recordData(columns: CsvColumns, record: string[]): { data: Record<string, JsonValue>; types: Record<string, FieldType> } {
  const data: Record<string, JsonValue> = {};
  const types: Record<string, FieldType> = {};
  for (const { index, key } of columns.data) {
    const cell = record[index]?.trim();
    if (cell === undefined || cell === '') continue;
    const typed = typeCsvCell(cell);
    Object.defineProperty(data, key, { value: typed.value, enumerable: true, writable: true, configurable: true });
    Object.defineProperty(types, key, { value: typed.type, enumerable: true, writable: true, configurable: true });
  }
  return { data, types };
}
