import { Migration } from '@mikro-orm/migrations';

/**
 * Segments (db/segments/segments.ts) and what their compiled conditions (db/conditions/sql.ts) need:
 *
 *  - segments, segment_members (static members; the membership of tracked dynamic segments);
 *  - contact_field_tombstones: the custom fields a project deleted (kept by a trigger on
 *    contact_fields), because a filter on a deleted field matches nothing while a filter on a key
 *    never seen follows the ordinary rules (missing → only notExists);
 *  - SQL helpers that give the workflow CONDITION evaluator's value rules (db/conditions/evaluate.ts) to
 *    PostgreSQL: a number from a JSON value, an ISO 8601 date(-time) as epoch milliseconds (NULL,
 *    never an error, for anything else), equality with the elements of an array. No `?` in here: knex would take it for a binding;
 *    `{0,1}` stands in for it in the regular expressions;
 *  - indexes for member counts over a million contacts (bench/segments.ts measures them).
 */
export class Migration20261125030000_segments extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table segments (
        id text primary key,
        project_id text not null references projects(id) on delete cascade,
        name text not null,
        description text,
        type text not null check (type in ('DYNAMIC','STATIC')),
        condition jsonb,
        track_membership boolean not null default false,
        member_count integer not null default 0,
        member_count_updated_at timestamptz,
        -- The outcome of the last compute, by compute id: a retried activity returns it instead of
        -- diffing again (which would find nothing left to do and lose the events to deliver).
        last_compute jsonb,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint segments_condition_by_type check ((type = 'DYNAMIC') = (condition is not null))
      );`);
    this.addSql(`create index segments_project on segments (project_id, id);`);
    this.addSql(`
      create table segment_members (
        segment_id text not null references segments(id) on delete cascade,
        contact_id text not null references contacts(id) on delete cascade,
        added_at timestamptz not null default now(),
        primary key (segment_id, contact_id)
      );`);
    // Deleting a contact cascades here; "is this contact a member of …" reads it too.
    this.addSql(`create index segment_members_contact on segment_members (contact_id);`);

    this.addSql(`
      create table contact_field_tombstones (
        project_id text not null references projects(id) on delete cascade,
        key text not null,
        deleted_at timestamptz not null default now(),
        primary key (project_id, key)
      );`);
    // A key leaves the registry first when a field is deleted (db/contacts/fields.ts), and comes back when
    // a later write types it afresh. A project being deleted takes its fields along: no tombstone.
    this.addSql(`
      create function contact_fields_tombstone() returns trigger language plpgsql as $$
      begin
        if tg_op = 'DELETE' then
          insert into contact_field_tombstones (project_id, key)
          select old.project_id, old.key where exists (select 1 from projects p where p.id = old.project_id)
          on conflict (project_id, key) do update set deleted_at = now();
          return old;
        end if;
        delete from contact_field_tombstones where project_id = new.project_id and key = new.key;
        return new;
      end $$;`);
    this.addSql(`
      create trigger contact_fields_tombstone after insert or delete on contact_fields
      for each row execute function contact_fields_tombstone();`);

    // A JSON number, or a numeric string (conditions.ts NUMERIC, trimmed), as numeric; NULL otherwise.
    // For fields the project types number. Inlined by the planner.
    this.addSql(`
      create function segment_num_coerce(v jsonb) returns numeric language sql immutable parallel safe as $$
        select case jsonb_typeof(v)
          when 'number' then v::numeric
          when 'string' then case
            when v #>> '{}' ~ '^[ \\t\\n\\r\\f\\v]*[+-]{0,1}([0-9]+(\\.[0-9]*){0,1}|\\.[0-9]+)([eE][+-]{0,1}[0-9]{1,3}){0,1}[ \\t\\n\\r\\f\\v]*$'
            then (v #>> '{}')::numeric end
        end
      $$;`);
    // Epoch milliseconds of a full ISO 8601 date-time (date, time, Z or an offset), or with
    // date_only_too of a YYYY-MM-DD date (UTC midnight) as well; NULL for anything else, impossible
    // dates included. The same rules and arithmetic as conditions.ts parseFullIsoDateTime: years
    // before 100 are refused (Date.UTC maps them to 19xx), fractions are floored to milliseconds.
    // The canonical form by character tests; the others by a match-only regular expression, then
    // fixed positions (PostgreSQL's regex captures cost ten times as much). Compiled filters call it only after a cheap test of the date's first ten
    // characters (db/conditions/sql.ts), so most contacts never get here.
    this.addSql(`
      create function segment_iso_ms(s text, date_only_too boolean) returns numeric
      language plpgsql immutable strict parallel safe cost 10 as $$
      declare
        n int := length(s);
        zlen int; t text;
        y int; mo int; d int; h int := 0; mi int := 0; sec int := 0; frac numeric := 0; off_min int := 0;
      begin
        -- The canonical UTC form (what toISOString writes), checked without a regular expression.
        if (n = 20 or (n = 24 and substr(s, 20, 1) = '.')) and s like '____-__-__T__:__:__%Z'
           and ltrim(substr(s, 1, 4) || substr(s, 6, 2) || substr(s, 9, 2) || substr(s, 12, 2) || substr(s, 15, 2)
                     || substr(s, 18, 2) || substr(s, 21, greatest(n - 21, 0)), '0123456789') = '' then
          h := substr(s, 12, 2)::int;
          mi := substr(s, 15, 2)::int;
          sec := substr(s, 18, 2)::int;
          if n = 24 then frac := substr(s, 21, 3)::int; end if;
          if h > 23 or mi > 59 or sec > 59 then return null; end if;
        elsif n = 10 then
          if not date_only_too or s !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' then return null; end if;
        elsif s ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]+){0,1}){0,1}([Zz]|[+-][0-9]{2}(:{0,1}[0-9]{2}){0,1})$' then
          -- The zone (Z, ±HH, ±HHMM or ±HH:MM) ends the text; seconds and a fraction may precede it.
          zlen := case when right(s, 1) in ('Z', 'z') then 1 when substr(s, n - 2, 1) = ':' then 6
                       when substr(s, n - 4, 1) in ('+', '-') then 5 else 3 end;
          t := substr(s, 17, n - zlen - 16);
          h := substr(s, 12, 2)::int;
          mi := substr(s, 15, 2)::int;
          if t <> '' then
            sec := substr(t, 2, 2)::int;
            if length(t) > 3 then frac := floor(('0.' || substr(t, 5))::float8 * 1000); end if;
          end if;
          if zlen > 1 then
            off_min := substr(s, n - zlen + 2, 2)::int * 60 + case when zlen = 3 then 0 else right(s, 2)::int end;
            if substr(s, n - zlen + 2, 2)::int > 23 or (zlen > 3 and right(s, 2)::int > 59) then return null; end if;
            if substr(s, n - zlen + 1, 1) = '-' then off_min := -off_min; end if;
          end if;
          if h > 23 or mi > 59 or sec > 59 then return null; end if;
        else
          return null;
        end if;
        y := substr(s, 1, 4)::int;
        mo := substr(s, 6, 2)::int;
        d := substr(s, 9, 2)::int;
        if y < 100 or mo < 1 or mo > 12 or d < 1
           or d > (case when mo = 2 then (case when (y % 4 = 0 and y % 100 <> 0) or y % 400 = 0 then 29 else 28 end)
                        when mo in (4, 6, 9, 11) then 30 else 31 end) then
          return null;
        end if;
        return (make_date(y, mo, d) - date '1970-01-01')::numeric * 86400000
          + ((h * 60 + mi) * 60 + sec) * 1000 + frac - off_min * 60000;
      end $$;`);

    // conditions.ts scalarEquals for the elements of a JSON array: some element equals the value.
    // The value comes pre-read (as a number, a boolean, lower-cased text, an instant) as compiling
    // reads it. A function rather than an EXISTS in the compiled SQL: a correlated subquery would make
    // every segment scan serial; this keeps them parallel, and runs only for values that are arrays.
    // Its cost (and segment_iso_ms's) is declared low: the planner charges a function on every row,
    // while compiled filters call them only behind cheap tests, and the default made it prefer an
    // 86%-selective bitmap scan of contacts_project_subscribed to a seq scan that is 1.5x faster.
    this.addSql(`
      create function segment_array_has(arr jsonb, want_num numeric, want_bool boolean, want_text text, want_ms numeric,
                                        date_type boolean, number_type boolean)
      returns boolean language sql immutable parallel safe cost 5 as $$
        select exists (
          select 1 from jsonb_array_elements(case when jsonb_typeof(arr) = 'array' then arr else '[]'::jsonb end) e
          where case jsonb_typeof(e.value)
            when 'number' then coalesce(e.value::numeric = want_num, false)
            when 'boolean' then coalesce(e.value::boolean = want_bool, false)
            when 'string' then case
              when number_type and segment_num_coerce(e.value) is not null then coalesce(segment_num_coerce(e.value) = want_num, false)
              when want_ms is not null then coalesce(segment_iso_ms(e.value #>> '{}', date_type) = want_ms, false)
              else lower(e.value #>> '{}') = want_text
            end
            else false
          end)
      $$;`);

    // Counts over a million contacts (bench/segments.ts, EXPLAIN there):
    //  - subscribed = true/false, alone or as the audience of "all subscribed contacts";
    //  - createdAt comparisons, within / olderThan (created_at never changes: no HOT cost);
    //  - event.<name> triggered / triggeredWithin / triggeredOlderThan: the window of one event
    //    name, read index-only with the contact ids, then a semi-join.
    // Measured and left out: updated_at (every contact write changes it, and an index on it would
    // cost each write its heap-only update); events (contact_id, name, created_at) for the
    // per-contact probe an event filter under OR makes (no faster than events_contact, since
    // contacts have few events each); per-field expression indexes on data (a filter's type-aware,
    // case-insensitive, array-aware expression is not one an index can serve, and typical
    // conditions match too much of a project for an index to beat a parallel scan).
    // segment_members' primary key (segment_id, contact_id) serves static counts and membership.
    this.addSql(`create index contacts_project_subscribed on contacts (project_id, subscribed);`);
    this.addSql(`create index contacts_project_created on contacts (project_id, created_at);`);
    this.addSql(`create index events_name_time on events (project_id, name, created_at) include (contact_id);`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists events_name_time, contacts_project_created, contacts_project_subscribed;');
    this.addSql('drop function if exists segment_array_has(jsonb, numeric, boolean, text, numeric, boolean, boolean), segment_iso_ms(text, boolean), segment_num_coerce(jsonb);');
    this.addSql('drop trigger if exists contact_fields_tombstone on contact_fields;');
    this.addSql('drop function if exists contact_fields_tombstone();');
    this.addSql('drop table if exists contact_field_tombstones, segment_members, segments;');
  }
}
