import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../errors';
import { query, queryOne } from './sql';

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

export interface CursorPage<T> {
  data: T[];
  cursor: string | null;
  hasMore: boolean;
  /** Filled on the first page only; 0 on later pages (the OpenAPI description's Pagination section). */
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
  return pageOfRows(rows, limit, total, (last) => encodeCursor(last.id), (row) => row);
}

/** The same for any keyset: `cursorOf` encodes the last row's sort key, `map` shapes each row. */
export function pageOfRows<R, T>(rows: R[], limit: number, total: number, cursorOf: (last: R) => string, map: (row: R) => T): CursorPage<T> {
  const hasMore = rows.length > limit;
  const page = hasMore ? rows.slice(0, limit) : rows;
  return { data: page.map(map), cursor: hasMore ? cursorOf(page[page.length - 1]!) : null, hasMore, total };
}

/**
 * Page-based listing (segment members and the like): the rows of one page plus the total.
 * `fetch` receives LIMIT/OFFSET; both calls see the same filters, so the figures agree.
 */
export async function pageBased<T>(
  page: number,
  pageSize: number,
  fetch: (limit: number, offset: number) => Promise<T[]>,
  count: () => Promise<number>,
): Promise<PageBased<T>> {
  const [data, total] = await Promise.all([fetch(pageSize, (page - 1) * pageSize), count()]);
  return { data, total, page, pageSize };
}

/**
 * One newest-first keyset page: `total` counted on the first page only, then rows with an id
 * below the cursor. Rows inserted while a client pages get larger ids and never shift a page.
 */
export async function keysetPage<T extends { id: string }>(
  em: EntityManager,
  spec: { from: string; columns: string; idColumn: string; where: string[]; params: unknown[]; limit: number; cursor?: string },
): Promise<CursorPage<T>> {
  const where = spec.where.join(' and ');
  const total = spec.cursor
    ? 0
    : Number((await queryOne<{ n: string }>(em, `select count(*) as n from ${spec.from} where ${where}`, spec.params))!.n);
  const after = spec.cursor ? [decodeCursor(spec.cursor)] : [];
  const rows = await query<T>(
    em,
    `select ${spec.columns} from ${spec.from} where ${where}${after.length ? ` and ${spec.idColumn} < ?` : ''}
     order by ${spec.idColumn} desc limit ?`,
    [...spec.params, ...after, spec.limit + 1],
  );
  return toCursorPage(rows, spec.limit, total);
}

/** The plain list endpoint: one table's rows of the project, newest first. */
export function projectRowsPage<T extends { id: string }>(
  em: EntityManager,
  table: string,
  columns: string,
  projectId: string,
  opts: { limit: number; cursor?: string },
): Promise<CursorPage<T>> {
  return keysetPage<T>(em, { from: table, columns, idColumn: 'id', where: ['project_id = ?'], params: [projectId], ...opts });
}
