import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, notFound } from '../../errors';
import { type DataPatch, inferFieldType, planDataPatch } from './data';
import type { JsonValue } from '../entities/contact';
import { newId } from '../ids';
import { recordEventsCtes } from '../record-events';
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

export interface ContactUpsert extends ContactInput {
  projectId: string;
  /** A new contact's subscription when the input says nothing. */
  subscribedWhenNew: boolean;
  /** The id it gets if it is new, when the caller chose it (to render with it); else drawn here. */
  newId?: string;
}

export interface PlannedUpsert {
  /** The id the contact gets if it is new. */
  newId: string;
  patch: DataPatch;
}

/**
 * Creates or patches contacts by email, several in one statement (each contact at most once), as
 * CTEs for a statement that goes on from there (`with …, changed as (…)`):
 *  - `r`: the inputs (`ord` is an input's index, `project_id`, `email`, `set_data`);
 *  - `registered`: keys seen for the first time, with the type of the first input that has them;
 *  - `previous`: the rows as they were, locked in (project, email) order, so two statements never
 *    wait on each other in a cycle;
 *  - `up`: the rows as written (CONTACT_COLUMNS, `project_id`, `inserted`, `previous_subscribed`);
 *  - `changes`, with `recordChanges`: the contact.subscribed / contact.unsubscribed events to record
 *    when an explicit value changed an existing contact's state (recordSubscriptionChange's rule, in
 *    SQL), as the source columns of db/record-events.ts recordEventsCtes; the caller records them
 *    in the same statement, with its own events when it has any, so they keep their order.
 */
export function contactUpsertCtes(
  inputs: readonly ContactUpsert[],
  opts: { recordChanges: boolean },
): { sql: string; params: unknown[]; planned: PlannedUpsert[]; changes?: string } {
  const cols = {
    ord: [] as number[],
    project: [] as string[],
    email: [] as string[],
    newId: [] as string[],
    subscribedNew: [] as boolean[],
    subscribedGiven: [] as (boolean | null)[],
    set: [] as string[],
    remove: [] as string[],
    changeId: [] as (string | null)[],
  };
  const fields = { project: [] as string[], key: [] as string[], type: [] as string[] };
  const planned = inputs.map((input, ord): PlannedUpsert => {
    const patch = planDataPatch(input.data);
    const id = input.newId ?? newId('cnt');
    cols.ord.push(ord);
    cols.project.push(input.projectId);
    cols.email.push(normalizeEmail(input.email));
    cols.newId.push(id);
    cols.subscribedNew.push(input.subscribed ?? input.subscribedWhenNew);
    cols.subscribedGiven.push(input.subscribed ?? null);
    cols.set.push(JSON.stringify(patch.set));
    cols.remove.push(JSON.stringify(patch.remove));
    // Drawn before the caller's own event ids, so a change sorts before the event that carried it.
    cols.changeId.push(opts.recordChanges ? newId('evt') : null);
    for (const [key, value] of Object.entries(patch.set)) {
      fields.project.push(input.projectId);
      fields.key.push(key);
      fields.type.push(inferFieldType(value));
    }
    return { newId: id, patch };
  });
  const sql = `with r as (
       select * from unnest(?::int[], ?::text[], ?::text[], ?::text[], ?::boolean[], ?::boolean[], ?::jsonb[], ?::jsonb[], ?::text[])
         as r(ord, project_id, email, new_id, subscribed_new, subscribed_given, set_data, remove, change_id)
     ), registered as (
       insert into contact_fields (project_id, key, type)
       select distinct on (project_id, key) project_id, key, type
       from unnest(?::text[], ?::text[], ?::text[]) with ordinality as f(project_id, key, type, n)
       order by project_id, key, n
       on conflict do nothing
     ), previous as (
       -- One lookup per input, in key order (the lock order): lateral, kept apart from the outer query by
       -- its limit. As a join the planner scans the whole table when it is small or has grown since its
       -- last ANALYZE, guessing 10 rows for r.
       select c.project_id, c.email, c.subscribed
       from (select distinct project_id, email from r order by project_id, email) k cross join lateral (
         select c.project_id, c.email, c.subscribed from contacts c where c.project_id = k.project_id and c.email = k.email limit 1) c
       order by c.project_id, c.email
       for update of c
     ), up as (
       insert into contacts as c (id, project_id, email, subscribed, data)
       -- Reading "previous" here makes PostgreSQL lock and read the old rows before the write;
       -- referenced only later, it would run after it and see nothing.
       select r.new_id, r.project_id, r.email, r.subscribed_new, r.set_data from r, (select count(*) from previous) as locked
       order by r.project_id, r.email
       on conflict (project_id, email) do update set
         subscribed = coalesce((select r.subscribed_given from r where r.project_id = excluded.project_id and r.email = excluded.email), c.subscribed),
         data = (c.data || excluded.data)
           - (select array(select jsonb_array_elements_text(r.remove)) from r where r.project_id = excluded.project_id and r.email = excluded.email),
         updated_at = now()
       returning ${CONTACT_COLUMNS}, c.project_id, (xmax = 0) as inserted,
         (select p.subscribed from previous p where p.project_id = c.project_id and p.email = c.email) as previous_subscribed
     )${
       opts.recordChanges
         ? `, changes as (
       select r.change_id as id, up.project_id, up.id as contact_id,
         case when up.subscribed then 'contact.subscribed' else 'contact.unsubscribed' end as name,
         '{}'::jsonb as data, null::jsonb as context, false as by_journey
       from up join r on r.project_id = up.project_id and r.email = up.email
       where not up.inserted and up.previous_subscribed <> up.subscribed
     )`
         : ''
     }`;
  const params = [
    cols.ord, cols.project, cols.email, cols.newId, cols.subscribedNew, cols.subscribedGiven, cols.set, cols.remove, cols.changeId,
    fields.project, fields.key, fields.type,
  ];
  return { sql, params, planned, ...(opts.recordChanges ? { changes: 'changes' } : {}) };
}

/**
 * Create or patch by email in one statement, applying the `data` rules, with the
 * contact.subscribed / contact.unsubscribed event when an explicit value changed the subscription.
 */
export async function upsertContact(
  em: EntityManager,
  projectId: string,
  input: ContactInput,
  opts: { subscribedWhenNew: boolean },
): Promise<UpsertResult> {
  const { sql, params, planned } = contactUpsertCtes([{ ...input, projectId, subscribedWhenNew: opts.subscribedWhenNew }], { recordChanges: true });
  const row = await queryOne<ContactRow & { inserted: boolean; previous_subscribed: boolean | null }>(
    em,
    `${sql}, ${recordEventsCtes('changes')} select * from up`,
    params,
  );
  return {
    contact: toContactDto(row!),
    isNew: row!.inserted,
    previousSubscribed: row!.inserted ? null : row!.previous_subscribed,
    transient: planned[0]!.patch.transient,
  };
}

export async function getContact(em: EntityManager, projectId: string, id: string): Promise<ContactDto> {
  const row = await queryOne<ContactRow>(em, `select ${CONTACT_COLUMNS} from contacts c where c.project_id = ? and c.id = ?`, [
    projectId,
    id,
  ]);
  if (!row) throw notFound('contact');
  return toContactDto(row);
}

/**
 * PATCH semantics on one contact, in one statement, with the contact.subscribed /
 * contact.unsubscribed event when the subscription changed (`byJourney`: a journey's UPDATE_CONTACT
 * made the change, so the event starts no journey: db/record-events.ts).
 */
export async function updateContact(
  em: EntityManager,
  projectId: string,
  id: string,
  input: Partial<ContactInput>,
  opts: { byJourney?: boolean } = {},
): Promise<{ contact: ContactDto; previousSubscribed: boolean }> {
  const patch = planDataPatch(input.data);
  const reg = registerFieldsCte(projectId, patch, id);
  const sql = `${reg.sql || 'with '}previous as (
      select subscribed from contacts where project_id = ? and id = ? for update
    ), updated as (
      update contacts c set
        email = coalesce(?, c.email),
        subscribed = coalesce(?::boolean, c.subscribed),
        data = (c.data || ?::jsonb) - ?::text[],
        updated_at = now()
      from (select count(*) from previous) as locked
      where c.project_id = ? and c.id = ?
      returning ${CONTACT_COLUMNS}, c.project_id, (select subscribed from previous) as previous_subscribed
    ), changes as (
      select ?::text as id, u.project_id, u.id as contact_id,
        case when u.subscribed then 'contact.subscribed' else 'contact.unsubscribed' end as name,
        '{}'::jsonb as data, null::jsonb as context, ?::boolean as by_journey
      from updated u where u.subscribed <> u.previous_subscribed
    ), ${recordEventsCtes('changes')}
    select * from updated`;
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
      newId('evt'),
      opts.byJourney ?? false,
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

/**
 * Newest first, keyset on id: contacts created while a client pages land before its cursor.
 * `matching` is a further predicate on `contacts c` (a compiled segment condition).
 */
export async function listContacts(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string; search?: string; subscribed?: boolean; matching?: { sql: string; params: unknown[] } },
): Promise<CursorPage<ContactDto>> {
  const where = ['c.project_id = ?'];
  const params: unknown[] = [projectId];
  if (opts.search) {
    where.push('c.email like ?');
    params.push(likePattern(opts.search.toLowerCase()));
  }
  if (opts.subscribed !== undefined) {
    where.push('c.subscribed = ?');
    params.push(opts.subscribed);
  }
  if (opts.matching) {
    where.push(`(${opts.matching.sql})`);
    params.push(...opts.matching.params);
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
