import type { EntityManager } from '@mikro-orm/postgresql';
import type { JsonValue } from '../entities/contact';
import { type RecordedEvent, recordEvents, subscriptionEventName } from '../record-events';
import { type CursorPage, keysetPage } from '../paging';
import { query } from '../sql';

/** Names the service emits itself; clients may not track them (docs/journeys.md, Which events). */
export const RESERVED_EVENT_PREFIXES = ['email.', 'contact.', 'segment.'] as const;
export const isReservedEventName = (name: string) => RESERVED_EVENT_PREFIXES.some((p) => name.startsWith(p));

export interface EventDto {
  id: string;
  name: string;
  contactId: string | null;
  email: string | null;
  data: Record<string, JsonValue>;
  createdAt: string;
}

interface EventRow {
  id: string;
  name: string;
  contact_id: string | null;
  email: string | null;
  data: Record<string, JsonValue>;
  created_at: Date;
}

const toDto = (r: EventRow): EventDto => ({
  id: r.id,
  name: r.name,
  contactId: r.contact_id,
  email: r.email,
  data: r.data,
  createdAt: new Date(r.created_at).toISOString(),
});

/** One event, through the one event path (db/record-events.ts). */
export async function recordEvent(
  em: EntityManager,
  projectId: string,
  contactId: string | null,
  name: string,
  data: Record<string, JsonValue> = {},
  opts: { byJourney?: boolean } = {},
): Promise<RecordedEvent> {
  const [recorded] = await recordEvents(em, [{ projectId, contactId, name, data, byJourney: opts.byJourney }]);
  return recorded!;
}

/** contact.subscribed / contact.unsubscribed when an explicit value changed the state; never for a no-op. */
export async function recordSubscriptionChange(
  em: EntityManager,
  projectId: string,
  contactId: string,
  previous: boolean | null,
  current: boolean,
  opts: { byJourney?: boolean } = {},
): Promise<void> {
  if (previous === null || previous === current) return;
  await recordEvent(em, projectId, contactId, subscriptionEventName(current), {}, opts);
}

export async function listEvents(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string; name?: string; contactId?: string },
): Promise<CursorPage<EventDto>> {
  const where = ['e.project_id = ?'];
  const params: unknown[] = [projectId];
  if (opts.name) {
    where.push('e.name = ?');
    params.push(opts.name);
  }
  if (opts.contactId) {
    where.push('e.contact_id = ?');
    params.push(opts.contactId);
  }
  const page = await keysetPage<EventRow>(em, {
    from: 'events e left join contacts c on c.id = e.contact_id',
    columns: 'e.id, e.name, e.contact_id, c.email, e.data, e.created_at',
    idColumn: 'e.id',
    where,
    params,
    limit: opts.limit,
    cursor: opts.cursor,
  });
  return { ...page, data: page.data.map(toDto) };
}

export async function eventNames(
  em: EntityManager,
  projectId: string,
): Promise<{ name: string; count: number; lastSeenAt: string }[]> {
  const rows = await query<{ name: string; n: string; last: Date }>(
    em,
    'select name, count(*) as n, max(created_at) as last from events where project_id = ? group by name order by name',
    [projectId],
  );
  return rows.map((r) => ({ name: r.name, count: Number(r.n), lastSeenAt: new Date(r.last).toISOString() }));
}

export interface EventStats {
  total: number;
  last24h: number;
  last7d: number;
  byName: { name: string; count: number; last24h: number; last7d: number; lastSeenAt: string }[];
}

/** Counts in all, over the last 24 hours and 7 days, and per name (most frequent first); one scan. */
export async function eventStats(em: EntityManager, projectId: string): Promise<EventStats> {
  const rows = await query<{ name: string; n: string; d1: string; d7: string; last: Date }>(
    em,
    `select name, count(*) as n,
       count(*) filter (where created_at > now() - interval '24 hours') as d1,
       count(*) filter (where created_at > now() - interval '7 days') as d7,
       max(created_at) as last
     from events where project_id = ? group by name order by count(*) desc, name`,
    [projectId],
  );
  const byName = rows.map((r) => ({
    name: r.name,
    count: Number(r.n),
    last24h: Number(r.d1),
    last7d: Number(r.d7),
    lastSeenAt: new Date(r.last).toISOString(),
  }));
  const sum = (pick: (r: (typeof byName)[number]) => number) => byName.reduce((acc, r) => acc + pick(r), 0);
  return { total: sum((r) => r.count), last24h: sum((r) => r.last24h), last7d: sum((r) => r.last7d), byName };
}

const DELETE_BATCH = 5000;

/**
 * Deletes every event with the name, reserved (email.*, contact.*, segment.*) ones included:
 * it removes history only, nothing the service needs to run. Batches of 5,000 rows, each its
 * own statement, so a large name never holds locks on all its rows at once.
 */
export async function deleteEventsByName(em: EntityManager, projectId: string, name: string): Promise<number> {
  let deleted = 0;
  for (;;) {
    const rows = await query(
      em,
      'delete from events where id in (select id from events where project_id = ? and name = ? limit ?) returning id',
      [projectId, name, DELETE_BATCH],
    );
    deleted += rows.length;
    if (rows.length < DELETE_BATCH) return deleted;
  }
}
