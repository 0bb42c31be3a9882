import type { EntityManager } from '@mikro-orm/postgresql';
import { conditionFilters, parseConditionField, type Condition } from './grammar';
import type { FieldType } from '../entities/contact-field';
import { query, queryOne } from '../sql';

/**
 * Typed slot columns for custom fields (migration 20261128000000): a field that segment conditions
 * name gets a column on contacts with a btree, filled by a trigger from `data`, so counting
 * `data.plan = 'pro'`, `data.age > 30` or `data.signedUpAt within 30 days` reads an index range
 * instead of the JSON of every contact. A project has four slots of each kind; fields beyond them
 * keep the JSON expression, which gives the same answer, only slower.
 *
 * A slot becomes ready in four steps (prepareFieldSlots, run by the prepareFieldSlots workflow):
 *  1. the mapping is committed (after the trigger exists: ensureSlotTriggers): from then on every
 *     contact written gets the value from the trigger;
 *  2. transactions that were writing contacts before it (their trigger did not see the mapping)
 *     are waited for;
 *  3. every contact of the project is back-filled (all new slots in one pass);
 *  4. the slot's index is built if no project had used the slot yet, then the slots are marked
 *     ready.
 */

export type SlotKind = 't' | 'n' | 'd';
export const SLOT_KIND: Partial<Record<FieldType, SlotKind>> = { string: 't', number: 'n', date: 'd' };
const SLOTS_PER_KIND = 4;
const slotsOf = (kind: SlotKind) => Array.from({ length: SLOTS_PER_KIND }, (_, i) => `${kind}${i + 1}`);

/** A ready slot as the condition compiler uses it. */
export interface FieldSlot {
  /** The column on contacts, e.g. slot_t1. */
  column: string;
  kind: SlotKind;
  /** Some contact's value is a JSON array (text slots): equality cannot be answered by the slot. */
  hasList: boolean;
}

/** The column of a slot name, checked: it goes into SQL text. */
export function slotColumn(slot: string): string {
  if (!/^[tnd][1-4]$/.test(slot)) throw new Error(`not a field slot: ${slot}`);
  return `slot_${slot}`;
}

/** The value a slot holds for a contact, as the trigger computes it (migration 20261128000000). */
const SLOT_VALUE: Record<SlotKind, (json: string) => string> = {
  t: (json) => `segment_slot_text(${json})`,
  n: (json) => `segment_num_key(segment_num_coerce(${json}))`,
  d: (json) => `segment_slot_date(${json})`,
};

/**
 * A number as a number slot holds it (segment_num_key in the migration): its double's bits, with
 * negative numbers' non-sign bits flipped, so bigints order as the numbers do; -0 is 0.
 */
export function numberKey(n: number): bigint {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, n === 0 ? 0 : n);
  const bits = view.getBigInt64(0);
  return bits < 0n ? bits ^ 0x7fffffffffffffffn : bits;
}

/** Top-level custom keys the conditions name (a nested path has no type of its own, so no slot). */
export function conditionKeys(conditions: Condition[]): string[] {
  const keys = new Set<string>();
  for (const c of conditions) {
    for (const f of conditionFilters(c)) {
      const field = parseConditionField(f.field);
      if (field?.kind === 'data' && !field.path.includes('.')) keys.add(field.path);
    }
  }
  return [...keys];
}

/**
 * Maps the fields the project's segments name to free slots of their type, oldest segment first.
 * Returns the slots that still need a back-fill (new ones and any left unfinished).
 */
export async function assignFieldSlots(em: EntityManager, projectId: string): Promise<{ slot: string; key: string }[]> {
  const segments = await query<{ condition: Condition | null }>(em, 'select condition from segments where project_id = ? order by created_at, id', [
    projectId,
  ]);
  const wanted = conditionKeys(segments.flatMap((s) => (s.condition ? [s.condition] : [])));
  if (wanted.length > 0) {
    const fields = await query<{ key: string; type: FieldType; slot: string | null }>(
      em,
      `select f.key, f.type, s.slot from contact_fields f left join contact_field_slots s on s.project_id = f.project_id and s.key = f.key
       where f.project_id = ? and f.key = any(?::text[])`,
      [projectId, wanted],
    );
    const byKey = new Map(fields.map((f) => [f.key, f]));
    let triggers = false;
    for (const key of wanted) {
      const field = byKey.get(key);
      const kind = field && SLOT_KIND[field.type];
      if (!field || field.slot || !kind) continue;
      if (!triggers) await ensureSlotTriggers(em);
      triggers = true;
      // One workflow per project assigns, so nothing races here; on conflict keeps it safe if one did.
      await query(
        em,
        `insert into contact_field_slots (project_id, slot, key)
         select ?, s, ? from unnest(?::text[]) s
         where not exists (select 1 from contact_field_slots t where t.project_id = ? and t.slot = s)
         order by s limit 1
         on conflict do nothing`,
        [projectId, key, slotsOf(kind), projectId],
      );
    }
  }
  return query<{ slot: string; key: string }>(em, 'select slot, key from contact_field_slots where project_id = ? and not ready order by slot', [projectId]);
}

/**
 * Waits until every transaction that was writing contacts when this was called has ended, without
 * blocking anyone (as CREATE INDEX CONCURRENTLY waits for older lockers): those may have run the
 * trigger before a new mapping was committed.
 */
export async function waitForEarlierContactWriters(em: EntityManager, timeoutMs = 60_000): Promise<void> {
  const rows = await query<{ vxid: string }>(
    em,
    `select distinct virtualtransaction as vxid from pg_locks
     where locktype = 'relation' and relation = 'contacts'::regclass and mode = 'RowExclusiveLock' and granted and pid <> pg_backend_pid()`,
  );
  const earlier = rows.map((r) => r.vxid);
  const deadline = Date.now() + timeoutMs;
  while (earlier.length > 0) {
    const left = await queryOne<{ n: number }>(em, 'select count(*)::int as n from pg_locks where virtualtransaction = any(?::text[])', [earlier]);
    if (!left || left.n === 0) return;
    if (Date.now() > deadline) throw new Error(`contact writers still running after ${timeoutMs} ms; the slot back-fill will be retried`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Back-fills one batch of slots, in contact id order after `after`, all slots in one pass: writes
 * only contacts whose slot values differ (a fresh slot, or values left by a field that had the slot
 * before). Returns the last id read, or null when the project has no more contacts.
 */
export async function backfillFieldSlots(
  em: EntityManager,
  projectId: string,
  slots: { slot: string; key: string }[],
  after: string,
  batchSize: number,
): Promise<string | null> {
  const value = (s: { slot: string }) => SLOT_VALUE[s.slot[0] as SlotKind]('c.data -> ?::text');
  const keys = slots.map((s) => s.key);
  const row = await queryOne<{ last: string | null }>(
    em,
    `with batch as (select id from contacts where project_id = ? and id > ? order by id limit ?),
     -- Runs to completion though nothing reads it (a data-modifying WITH always does).
     written as (
       update contacts c set ${slots.map((s) => `${slotColumn(s.slot)} = ${value(s)}`).join(', ')} from batch
       where c.id = batch.id and (${slots.map((s) => `c.${slotColumn(s.slot)} is distinct from ${value(s)}`).join(' or ')}))
     select max(id) as last from batch`,
    [projectId, after, batchSize, ...keys, ...keys],
  );
  return row?.last ?? null;
}

/**
 * The btree of a slot, built the first time any project uses the slot: `(project_id, slot,
 * subscribed) where slot is not null`. A contact without a value costs it nothing; subscribed, the
 * campaign audience's usual companion, is a key column rather than INCLUDEd, since an index with
 * INCLUDE columns is not deduplicated, and deduplication is what makes a count fast: contacts
 * sharing a value share an entry, so `data.plan = 'pro'` over 340,000 contacts reads 7 MB instead
 * of 67 MB (bench/segments.ts). Built concurrently, so contact writes go on meanwhile; a build that
 * was cut off leaves an invalid index, which is dropped and built again.
 */
export async function ensureSlotIndex(em: EntityManager, slot: string): Promise<void> {
  const column = slotColumn(slot);
  const name = `contacts_${column}`;
  const existing = await queryOne<{ valid: boolean }>(
    em,
    `select i.indisvalid as valid from pg_index i where i.indexrelid = to_regclass(?)`,
    [name],
  );
  if (existing?.valid) return;
  if (existing) await query(em, `drop index concurrently if exists ${name}`);
  await query(em, `create index concurrently if not exists ${name} on contacts (project_id, ${column}, subscribed) where ${column} is not null`);
}

/** After a full back-fill: notes whether a text slot met a list, then lets the compiler use it. */
export async function markFieldSlotReady(em: EntityManager, projectId: string, slot: { slot: string; key: string }): Promise<void> {
  await query(
    em,
    `update contact_field_slots s set ready = true,
       has_list = s.has_list or (left(s.slot, 1) = 't' and exists (
         select 1 from contacts c where c.project_id = s.project_id and jsonb_typeof(c.data -> s.key) = 'array'))
     where s.project_id = ? and s.slot = ? and s.key = ?`,
    [projectId, slot.slot, slot.key],
  );
}

/**
 * The trigger that fills the slots (contacts_fill_slots, migration 20261128000000), created the first
 * time any project gets a slot rather than by the migration: an install that never counts a
 * condition on `data` pays nothing on its contact writes. Created before the first mapping is
 * committed, so the writers step 2 waits for are the only ones that can have missed it.
 */
export async function ensureSlotTriggers(em: EntityManager): Promise<void> {
  const existing = await query<{ name: string }>(
    em,
    `select tgname as name from pg_trigger where tgrelid = 'contacts'::regclass and tgname in ('contacts_fill_slots_insert', 'contacts_fill_slots_update')`,
  );
  if (existing.length === 2) return;
  await query(em, `create or replace trigger contacts_fill_slots_insert before insert on contacts for each row execute function contacts_fill_slots()`);
  await query(
    em,
    `create or replace trigger contacts_fill_slots_update before update of data on contacts for each row
     when (old.data is distinct from new.data) execute function contacts_fill_slots()`,
  );
}

/**
 * Everything above in one call, for a project: assign, wait, back-fill each slot, mark ready.
 * `progress` is called after each batch (the activity heartbeats there).
 */
export async function prepareFieldSlots(
  em: EntityManager,
  projectId: string,
  options: { batchSize?: number; progress?: (done: { after: string }) => void } = {},
): Promise<{ prepared: string[] }> {
  const pending = await assignFieldSlots(em, projectId);
  if (pending.length === 0) return { prepared: [] };
  await waitForEarlierContactWriters(em);
  let after = '';
  for (;;) {
    const last = await backfillFieldSlots(em, projectId, pending, after, options.batchSize ?? 10_000);
    if (last === null) break;
    after = last;
    options.progress?.({ after });
  }
  for (const slot of pending) {
    await ensureSlotIndex(em, slot.slot);
    await markFieldSlotReady(em, projectId, slot);
  }
  return { prepared: pending.map((p) => `${p.key} → ${p.slot}`) };
}

/** Whether one of these keys is a field of a slotted type without a ready slot. */
export async function fieldsLackingSlots(em: EntityManager, projectId: string, keys: string[]): Promise<boolean> {
  const row = await queryOne(
    em,
    `select 1 from contact_fields f left join contact_field_slots s on s.project_id = f.project_id and s.key = f.key
     where f.project_id = ? and f.key = any(?::text[]) and f.type in ('string', 'number', 'date') and s.ready is not true
     limit 1`,
    [projectId, keys],
  );
  return row !== null && row !== undefined;
}

/** The project's ready slots by field key, for the condition compiler. */
export async function loadReadySlots(em: EntityManager, projectId: string): Promise<Map<string, FieldSlot>> {
  const rows = await query<{ key: string; slot: string; has_list: boolean }>(
    em,
    'select key, slot, has_list from contact_field_slots where project_id = ? and ready',
    [projectId],
  );
  return new Map(rows.map((r) => [r.key, { column: `c.${slotColumn(r.slot)}`, kind: r.slot[0] as SlotKind, hasList: r.has_list }]));
}
