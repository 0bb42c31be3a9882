import { Migration } from '@mikro-orm/migrations';

/** The typed slot columns on contacts: four text, four number and four date (db/conditions/field-slots.ts). */
const SLOTS = ['t1', 't2', 't3', 't4', 'n1', 'n2', 'n3', 'n4', 'd1', 'd2', 'd3', 'd4'] as const;
const COLUMN_TYPE = { t: 'text', n: 'bigint', d: 'bigint' } as const;

/**
 * events_note_name of migration 20261127000000, with the contact found by `contactIs`: by id alone
 * now; by id and project as before (down()).
 */
const eventsNoteName = (contactIs: string) => `
  create or replace function events_note_name() returns trigger language plpgsql as $$
  declare
    name_id integer;
  begin
    select r.id into name_id from event_name_ids r where r.project_id = new.project_id and r.name = new.name;
    if name_id is null then
      insert into event_name_ids (project_id, name) values (new.project_id, new.name) on conflict do nothing;
      select r.id into name_id from event_name_ids r where r.project_id = new.project_id and r.name = new.name;
      -- Only if a delete of the name's last events retired it in between (it cannot have seen this event).
      if name_id is null then return null; end if;
    end if;
    update contacts c set event_ids = c.event_ids || name_id where ${contactIs} and not c.event_ids @> array[name_id];
    return null;
  end $$;`;

/**
 * Typed slot columns, so a segment condition on a custom field can be counted from a btree instead
 * of by evaluating the JSON of every contact (bench/segments.ts: 240–330 ms at 1,000,000 contacts
 * whatever the expression).
 *
 *  - contacts gets 12 slot columns. A slot's btree is built the first time some project's field
 *    gets the slot (db/conditions/field-slots.ts ensureSlotIndex, CREATE INDEX CONCURRENTLY), not
 *    here: every index on contacts costs every contact write (opened, its predicate checked), about
 *    10 % of a /v1/track statement for the twelve together, which an install that never counts a
 *    condition on `data` should not pay. numeric is never deduplicated in a btree (1.0 and 1.00 are
 *    equal but differ), so number slots hold the value as a double in an order-preserving bigint
 *    (segment_num_key), which is also how the workflow evaluator compares numbers (JavaScript
 *    doubles).
 *  - contact_field_slots maps a project's field to a slot. `ready` says the column holds every
 *    contact's value; only then does the compiler use it (db/conditions/sql.ts). `has_list` says
 *    some contact's value of a text slot is a JSON array, which equality matches by element: then
 *    the slot cannot answer equality and the compiler keeps the JSON expression.
 *  - A trigger (created with the first slot, field-slots.ts ensureSlotTriggers, for the same
 *    reason as the indexes) fills the mapped slots of every contact written, from `data`, with
 *    the same functions the compiled conditions use: a text slot is the lower-cased string, a number slot
 *    segment_num_coerce as a double's key, a date slot segment_iso_ms (full ISO date-times, as
 *    within / olderThan read them). Unmapped slots are left as they are: a slot mapped again is
 *    back-filled in full before it is ready, which rewrites every stale value.
 *  - events_note_name (migration 20261127000000) updates the event's contact by id alone (the
 *    event's contact is of its project). With the new columns, the plan each session caches for
 *    its update, when made on a nearly empty table, took contacts_project_created (every index that
 *    starts with project_id costs the same there) and then read every contact of the project per
 *    event: /v1/track's PostgreSQL time per request grew with the project (bench/track.ts, 1.2 →
 *    3–4 ms at 5,000 contacts).
 */
export class Migration20261128000000_contact_field_slots extends Migration {
  override async up(): Promise<void> {
    for (const slot of SLOTS) {
      this.addSql(`alter table contacts add column slot_${slot} ${COLUMN_TYPE[slot[0] as 't' | 'n' | 'd']};`);
    }
    this.addSql(`
      create table contact_field_slots (
        project_id text not null,
        slot text not null check (slot in (${SLOTS.map((s) => `'${s}'`).join(', ')})),
        key text not null,
        ready boolean not null default false,
        has_list boolean not null default false,
        created_at timestamptz not null default now(),
        primary key (project_id, slot),
        unique (project_id, key),
        foreign key (project_id, key) references contact_fields (project_id, key) on delete cascade
      );`);

    this.addSql(`
      create function segment_slot_text(v jsonb) returns text language sql immutable parallel safe as $$
        select case when jsonb_typeof(v) = 'string' then lower(v #>> '{}') end
      $$;`);
    // A double's IEEE 754 bits as a bigint that orders as the doubles do (negative ones with all but
    // the sign bit flipped); field-slots.ts numberKey computes the same for a condition's value.
    // Beyond a double's range a value is ±Infinity, below half its smallest subnormal zero, as
    // JavaScript reads them (the cast would fail there instead).
    // plpgsql rather than SQL: as a SQL function it needs a subquery (the bits are read twice),
    // which the trigger would run through the executor, four times slower.
    this.addSql(`
      create function segment_num_key(n numeric) returns bigint language plpgsql immutable strict parallel safe as $$
      declare
        bits bigint;
      begin
        bits := ('x' || encode(float8send(case
          when n > 1.7976931348623157e308 then 'Infinity'::float8
          when n < -1.7976931348623157e308 then '-Infinity'::float8
          when abs(n) < 2.4703282292062328e-324 then 0::float8
          else n::float8 end), 'hex'))::bit(64)::bigint;
        return bits # ((bits >> 63) & 9223372036854775807);
      end $$;`);
    this.addSql(`
      create function segment_slot_date(v jsonb) returns bigint language sql immutable parallel safe as $$
        select segment_iso_ms(v #>> '{}', false)::bigint
      $$;`);

    const assign = SLOTS.map((s) => {
      const value = s[0] === 't' ? 'segment_slot_text(v)' : s[0] === 'n' ? 'segment_num_key(segment_num_coerce(v))' : 'segment_slot_date(v)';
      return `when '${s}' then new.slot_${s} := ${value};`;
    }).join('\n            ');
    this.addSql(`
      create function contacts_fill_slots() returns trigger language plpgsql as $$
      declare
        r record;
        v jsonb;
      begin
        for r in select s.slot, s.key, s.has_list from contact_field_slots s where s.project_id = new.project_id loop
          v := new.data -> r.key;
          case r.slot
            ${assign}
          end case;
          -- Once per field: equality on it goes back to the JSON expression (see the header).
          if left(r.slot, 1) = 't' and not r.has_list and jsonb_typeof(v) = 'array' then
            update contact_field_slots set has_list = true where project_id = new.project_id and slot = r.slot and not has_list;
          end if;
        end loop;
        return new;
      end $$;`);
    this.addSql(eventsNoteName('c.id = new.contact_id'));
  }

  override async down(): Promise<void> {
    this.addSql(eventsNoteName('c.id = new.contact_id and c.project_id = new.project_id'));
    this.addSql('drop trigger if exists contacts_fill_slots_update on contacts;');
    this.addSql('drop trigger if exists contacts_fill_slots_insert on contacts;');
    this.addSql('drop function contacts_fill_slots();');
    this.addSql('drop function segment_slot_text(jsonb), segment_slot_date(jsonb), segment_num_key(numeric);');
    this.addSql('drop table contact_field_slots;');
    for (const slot of SLOTS) this.addSql(`alter table contacts drop column slot_${slot};`);
  }
}
