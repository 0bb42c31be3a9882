import { AppError } from '../errors';

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

export interface CursorPage<T> {
  data: T[];
  cursor: string | null;
  hasMore: boolean;
  /** Filled on the first page only; 0 on later pages (spec "Conventions"). */
  total: number;
}

export interface PageBased<T> {
  data: T[];
  total: number;
  page: number;
  pageSize: number;
}

/** Cursors are opaque to clients: the id of the last row seen, base64url-encoded. */
export function encodeCursor(lastId: string): string {
  return Buffer.from(JSON.stringify({ after: lastId }), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (parsed && typeof parsed === 'object' && typeof (parsed as { after?: unknown }).after === 'string') {
      return (parsed as { after: string }).after;
    }
  } catch {
    // fall through to the error below
  }
  throw new AppError(400, 'INVALID_CURSOR', 'The cursor is not valid', {
    suggestion: 'Pass the cursor exactly as returned by the previous page, or omit it to start over.',
  });
}

/**
 * Builds a page from rows fetched with `LIMIT limit + 1` in id order: the extra row only
 * says whether another page exists.
 */
export function toCursorPage<T extends { id: string }>(rows: T[], limit: number, total: number): CursorPage<T> {
  const hasMore = rows.length > limit;
  const data = hasMore ? rows.slice(0, limit) : rows;
  return { data, cursor: hasMore ? encodeCursor(data[data.length - 1]!.id) : null, hasMore, total };
}

export function pageOffset(page: number, pageSize: number): number {
  return (page - 1) * pageSize;
}
