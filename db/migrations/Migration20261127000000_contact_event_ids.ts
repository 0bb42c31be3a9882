import { Migration } from '@mikro-orm/migrations';

/**
 * Which event names each contact has triggered, on the contact row, so a segment filter
 * `event.<name> triggered` (or notTriggered) is a test of a column rather than a lookup in events
 * per contact: under OR that lookup ran once per contact of the project (2.8 s at 1,000,000
 * contacts, bench/segments.ts).
 *
 *  - event_name_ids numbers each (project, event name) that some contact's event has; contacts
 *    hold the numbers (contacts.event_ids). A number is never reused.
 *  - After an insert into events, its name's number is added to its contact (a trigger). Only a
 *    contact that lacks the number is written: its later events of a name it has cost two lookups
 *    and no write.
 *  - Events are deleted three ways: with their contact (nothing to keep; the trigger returns at
 *    once), with their project's reset (every event, then every contact), or by name (db/events/events.ts,
 *    every event of the name in batches of 5,000). When a statement leaves a (project, name) with no
 *    event of a contact, its number is retired (the registry row goes): contacts keep it, but nothing
 *    asks for it any more, so a reset writes no contact row. A contact that still exists and lost its
 *    last event of a name whose other events remain loses the number: a delete by name writes each
 *    contact that had the name once, batch by batch, so the numbers are right between batches too.
 *  - Not numbered: the entry / exit events of tracked segments (segment.<slug>.entry|exit, see
 *    db/conditions/compile-context.ts summarizedEventName). A pair of names per segment, and a
 *    segment's first compute emits one per member: each segment would write every member's row once
 *    more. Filters on them look in events as before.
 *  - The back-fill writes each contact that has events once.
 */
export class Migration20261127000000_contact_event_ids extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table event_name_ids (
        project_id text not null references projects(id) on delete cascade,
        name text not null,
        id integer generated always as identity unique,
        primary key (project_id, name)
      );`);
    // A constant default: no table rewrite.
    this.addSql(`alter table contacts add column event_ids integer[] not null default '{}';`);

    // Row by row: a single-row insert (what /v1/track does) pays two index lookups, about 20 µs,
    // where a statement-level trigger with a transition table paid about 60 (bench/segments.ts).
    this.addSql(`
      create function events_note_name() returns trigger language plpgsql as $$
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
        update contacts c set event_ids = c.event_ids || name_id
        where c.id = new.contact_id and c.project_id = new.project_id and not c.event_ids @> array[name_id];
        return null;
      end $$;`);
    this.addSql(`
      create trigger events_note_name after insert on events for each row
      when (new.contact_id is not null and left(new.name, 8) <> 'segment.')
      execute function events_note_name();`);

    this.addSql(`
      create function events_forget_names() returns trigger language plpgsql as $$
      begin
        -- Deleted with their contacts (a contact delete's cascade, one statement per contact): no
        -- contact is left that could hold a number too many.
        if not exists (select 1 from old_events o join contacts c on c.id = o.contact_id) then
          return null;
        end if;
        delete from event_name_ids r
        using (select distinct o.project_id, o.name from old_events o where o.contact_id is not null) g
        where r.project_id = g.project_id and r.name = g.name
          and not exists (select 1 from events e where e.project_id = g.project_id and e.name = g.name and e.contact_id is not null);
        with lost as (
          select o.contact_id, array_agg(distinct r.id) as ids
          from (select distinct contact_id, project_id, name from old_events where contact_id is not null) o
          join event_name_ids r on r.project_id = o.project_id and r.name = o.name
          where not exists (select 1 from events e where e.contact_id = o.contact_id and e.project_id = o.project_id and e.name = o.name)
          group by o.contact_id
        ), stale as (
          select c.id, l.ids from contacts c join lost l on c.id = l.contact_id
          where c.event_ids && l.ids
          order by c.id
          for no key update of c
        )
        update contacts c set event_ids = array(select x from unnest(c.event_ids) x where x <> all(s.ids) order by x)
        from stale s where c.id = s.id;
        return null;
      end $$;`);
    this.addSql(`
      create trigger events_forget_names after delete on events referencing old table as old_events
      for each statement execute function events_forget_names();`);

    this.addSql(`
      insert into event_name_ids (project_id, name)
      select distinct e.project_id, e.name from events e where e.contact_id is not null and left(e.name, 8) <> 'segment.' order by 1, 2;`);
    this.addSql(`
      update contacts c set event_ids = t.ids
      from (
        select e.contact_id, e.project_id, array_agg(distinct r.id order by r.id) as ids
        from events e join event_name_ids r on r.project_id = e.project_id and r.name = e.name
        where e.contact_id is not null
        group by e.contact_id, e.project_id
      ) t
      where c.id = t.contact_id and c.project_id = t.project_id;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists events_forget_names on events;');
    this.addSql('drop trigger if exists events_note_name on events;');
    this.addSql('drop function if exists events_forget_names(), events_note_name();');
    this.addSql('alter table contacts drop column if exists event_ids;');
    this.addSql('drop table if exists event_name_ids;');
  }
}
