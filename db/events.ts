import type { EntityManager } from '@mikro-orm/postgresql';
import type { JsonValue } from './entities/contact';
import { newId } from './ids';
import { type CursorPage, keysetPage } from './paging';
import { query, queryOne } from './sql';

/** Names the service emits itself; clients may not track them (contract-decisions "Events"). */
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

export async function recordEvent(
  em: EntityManager,
  projectId: string,
  contactId: string | null,
  name: string,
  data: Record<string, JsonValue> = {},
): Promise<{ id: string; createdAt: string }> {
  const row = await queryOne<{ id: string; created_at: Date }>(
    em,
    'insert into events (id, project_id, contact_id, name, data) values (?, ?, ?, ?, ?::jsonb) returning id, created_at',
    [newId('evt'), projectId, contactId, name, JSON.stringify(data)],
  );
  return { id: row!.id, createdAt: new Date(row!.created_at).toISOString() };
}

/** contact.subscribed / contact.unsubscribed when an explicit value changed the state. */
export async function recordSubscriptionChange(
  em: EntityManager,
  projectId: string,
  contactId: string,
  previous: boolean | null,
  current: boolean,
): Promise<void> {
  if (previous === null || previous === current) return;
  await recordEvent(em, projectId, contactId, current ? 'contact.subscribed' : 'contact.unsubscribed');
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
