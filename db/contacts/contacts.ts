import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, notFound } from '../../errors';
import { type DataPatch, inferFieldType, planDataPatch } from './data';
import type { JsonValue } from '../entities/contact';
import { newId } from '../ids';
import { type CursorPage, keysetPage } from '../paging';
import { query, queryOne } from '../sql';

export interface ContactDto {
  id: string;
  email: string;
  subscribed: boolean;
  data: Record<string, JsonValue>;
  createdAt: string;
  updatedAt: string;
}

export interface ContactRow {
  id: string;
  email: string;
  subscribed: boolean;
  data: Record<string, JsonValue>;
  created_at: Date;
  updated_at: Date;
}

/** The columns of a contact row, from `contacts c`. */
export const CONTACT_COLUMNS = 'c.id, c.email, c.subscribed, c.data, c.created_at, c.updated_at';

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

export function toContactDto(row: ContactRow): ContactDto {
  return {
    id: row.id,
    email: row.email,
    subscribed: row.subscribed,
    data: row.data,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

/**
 * A CTE that registers the types of keys seen for the first time (the first type wins, so
 * conflicts are ignored). It rides along with the contact write: one round trip in all.
 * A data-modifying CTE runs even when the main statement matches no row, so an update names
 * its contact: a PATCH that ends in 404 must not fix the type of a key nothing stored.
 */
function registerFieldsCte(projectId: string, patch: DataPatch, contactId?: string): { sql: string; params: unknown[] } {
  const keys = Object.keys(patch.set);
  if (keys.length === 0) return { sql: '', params: [] };
  const guard = contactId === undefined ? '' : 'where exists (select 1 from contacts where project_id = ? and id = ?)';
  return {
    sql: `with registered as (
      insert into contact_fields (project_id, key, type)
      select ?, k, t from unnest(?::text[], ?::text[]) as f(k, t)
      ${guard}
      on conflict do nothing
    ), `,
    params: [
      projectId,
      keys,
      keys.map((k) => inferFieldType(patch.set[k]!)),
      ...(contactId === undefined ? [] : [projectId, contactId]),
    ],
  };
}

export interface ContactInput {
  email: string;
  subscribed?: boolean;
  data?: Record<string, unknown>;
}

export interface UpsertResult {
  contact: ContactDto;
  isNew: boolean;
  /** null for a new contact: lets callers emit contact.subscribed / unsubscribed on a change. */
  previousSubscribed: boolean | null;
  /** Non-persistent values, for the current request only. */
  transient: Record<string, JsonValue>;
}

/**
 * The upsert by email as the CTE `up` (CONTACT_COLUMNS, `inserted`, `previous_subscribed`), after
 * the registration of new keys: `with …, up as (…)`, for a statement that goes on from there.
 * `newId` is the id the contact gets if it is new.
 */
export function upsertContactCtes(
  projectId: string,
  input: ContactInput,
  opts: { subscribedWhenNew: boolean },
): { sql: string; params: unknown[]; patch: DataPatch; newId: string } {
  const email = normalizeEmail(input.email);
  const id = newId('cnt');
  const patch = planDataPatch(input.data);
  const reg = registerFieldsCte(projectId, patch);
  const sql = `${reg.sql || 'with '}previous as (
      select subscribed from contacts where project_id = ? and email = ? for update
    ), up as (
      insert into contacts as c (id, project_id, email, subscribed, data)
      -- Reading "previous" here makes PostgreSQL lock and read the old row before the write;
      -- referenced only in RETURNING, it would run after it and see nothing.
      select ?, ?, ?, ?, ?::jsonb from (select count(*) from previous) as locked
      on conflict (project_id, email) do update set
        subscribed = coalesce(?::boolean, c.subscribed),
        data = (c.data || ?::jsonb) - ?::text[],
        updated_at = now()
      returning ${CONTACT_COLUMNS}, (xmax = 0) as inserted, (select subscribed from previous) as previous_subscribed
    )`;
  const setJson = JSON.stringify(patch.set);
  const params = [
    ...reg.params,
    projectId,
    email,
    id,
    projectId,
    email,
    input.subscribed ?? opts.subscribedWhenNew,
    setJson,
    input.subscribed ?? null,
    setJson,
    patch.remove,
  ];
  return { sql, params, patch, newId: id };
}

/** Create or patch by email in one statement, applying the `data` rules. */
export async function upsertContact(
  em: EntityManager,
  projectId: string,
  input: ContactInput,
  opts: { subscribedWhenNew: boolean },
): Promise<UpsertResult> {
  const { sql, params, patch } = upsertContactCtes(projectId, input, opts);
  const row = await queryOne<ContactRow & { inserted: boolean; previous_subscribed: boolean | null }>(em, `${sql} select * from up`, params);
  return {
    contact: toContactDto(row!),
    isNew: row!.inserted,
    previousSubscribed: row!.inserted ? null : row!.previous_subscribed,
    transient: patch.transient,
  };
}

/** The contact with this address, if there is one. */
export async function findContactByEmail(em: EntityManager, projectId: string, email: string): Promise<ContactDto | undefined> {
  const row = await queryOne<ContactRow>(em, `select ${CONTACT_COLUMNS} from contacts c where c.project_id = ? and c.email = ?`, [
    projectId,
    normalizeEmail(email),
  ]);
  return row ? toContactDto(row) : undefined;
}

export async function getContact(em: EntityManager, projectId: string, id: string): Promise<ContactDto> {
  const row = await queryOne<ContactRow>(em, `select ${CONTACT_COLUMNS} from contacts c where c.project_id = ? and c.id = ?`, [
    projectId,
    id,
  ]);
  if (!row) throw notFound('contact');
  return toContactDto(row);
}

export async function updateContact(
  em: EntityManager,
  projectId: string,
  id: string,
  input: Partial<ContactInput>,
): Promise<{ contact: ContactDto; previousSubscribed: boolean }> {
  const patch = planDataPatch(input.data);
  const reg = registerFieldsCte(projectId, patch, id);
  const sql = `${reg.sql || 'with '}previous as (
      select subscribed from contacts where project_id = ? and id = ? for update
    )
    update contacts c set
      email = coalesce(?, c.email),
      subscribed = coalesce(?::boolean, c.subscribed),
      data = (c.data || ?::jsonb) - ?::text[],
      updated_at = now()
    from (select count(*) from previous) as locked
    where c.project_id = ? and c.id = ?
    returning ${CONTACT_COLUMNS}, (select subscribed from previous) as previous_subscribed`;
  try {
    const row = await queryOne<ContactRow & { previous_subscribed: boolean }>(em, sql, [
      ...reg.params,
      projectId,
      id,
      input.email === undefined ? null : normalizeEmail(input.email),
      input.subscribed ?? null,
      JSON.stringify(patch.set),
      patch.remove,
      projectId,
      id,
    ]);
    if (!row) throw notFound('contact');
    return { contact: toContactDto(row), previousSubscribed: row.previous_subscribed };
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw conflict('Another contact of this project already has that email', 'Use that contact, or choose another email.');
    }
    throw err;
  }
}

/**
 * db/sql.ts runs through knex, past MikroORM's exception mapping: a duplicate surfaces as the
 * driver's error with SQLSTATE 23505, not as UniqueConstraintViolationException.
 */
function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

export async function deleteContact(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await query(em, 'delete from contacts where project_id = ? and id = ? returning id', [projectId, id]);
  if (rows.length === 0) throw notFound('contact');
}

function likePattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (m) => `\\${m}`)}%`;
}

/** Newest first, keyset on id: contacts created while a client pages land before its cursor. */
export async function listContacts(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string; search?: string },
): Promise<CursorPage<ContactDto>> {
  const where = ['c.project_id = ?'];
  const params: unknown[] = [projectId];
  if (opts.search) {
    where.push('c.email like ?');
    params.push(likePattern(opts.search.toLowerCase()));
  }
  const page = await keysetPage<ContactRow>(em, {
    from: 'contacts c',
    columns: CONTACT_COLUMNS,
    idColumn: 'c.id',
    where,
    params,
    limit: opts.limit,
    cursor: opts.cursor,
  });
  return { ...page, data: page.data.map(toContactDto) };
}

export async function lookupContacts(
  em: EntityManager,
  projectId: string,
  emails: string[],
): Promise<{ found: { id: string; email: string }[]; notFound: string[] }> {
  const wanted = emails.map(normalizeEmail);
  const rows = await query<{ id: string; email: string }>(
    em,
    'select id, email from contacts where project_id = ? and email = any(?::text[])',
    [projectId, wanted],
  );
  const byEmail = new Map(rows.map((r) => [r.email, r]));
  const found: { id: string; email: string }[] = [];
  const missing: string[] = [];
  const seen = new Set<string>();
  emails.forEach((original, i) => {
    const key = wanted[i]!;
    if (seen.has(key)) return;
    seen.add(key);
    const row = byEmail.get(key);
    if (row) found.push(row);
    else missing.push(original);
  });
  return { found, notFound: missing };
}
