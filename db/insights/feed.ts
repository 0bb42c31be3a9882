import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../../errors';
import type { JsonValue } from '../entities/contact';
import { RESERVED_EVENT_PREFIXES } from '../events/events';
import { type CursorPage, pageOfRows } from '../paging';
import { query, queryOne } from '../sql';

/**
 * The activity feed (`GET /activity`) is a view, not a table: every row of
 * `events` (what clients track and what the service emits) plus journey and campaign milestones
 * read from `workflow_executions` and `campaigns`. Nothing is written twice, and history that
 * predates this code shows up too.
 *
 * Types:
 * - an emitted event (`email.*`, `contact.*`, `segment.*`, the reserved prefixes) is its own type;
 *   `email.received` is the inbound one (mail the contact sent us, api/use-cases/inbound.ts);
 * - a tracked event is `event.tracked`, its name in `name`;
 * - `workflow.started` (execution started_at), `workflow.completed` (finished_at of COMPLETED ones;
 *   test runs of a journey are left out of both, and of the upcoming executions),
 *   `campaign.sent` (sent_at), `campaign.scheduled` (campaigns with a scheduled_for, placed at the moment
 *   they were last scheduled or moved; at created_at for those scheduled before that was kept) come from those tables. They are not read
 *   from `events`: `campaign.*` and `workflow.*` are not reserved, so a client may track such names,
 *   and those stay `event.tracked`.
 */
export const TRACKED_TYPE = 'event.tracked';
export const DERIVED_TYPES = ['workflow.started', 'workflow.completed', 'campaign.scheduled', 'campaign.sent'] as const;
type DerivedType = (typeof DERIVED_TYPES)[number];

export const FEED_TYPE_NOTE =
  'Types: email.sent, email.delivered, email.opened, email.clicked, email.bounced, email.complained, ' +
  'email.received (inbound mail: a reply or other message from the contact), contact.subscribed, ' +
  'contact.unsubscribed, segment.<slug>.entry, segment.<slug>.exit, event.tracked (any name a client tracked), ' +
  'workflow.started, workflow.completed, campaign.scheduled, campaign.sent.';

export interface TypeFilter {
  value: string;
  /** Matches every type starting with `value`. */
  prefix: boolean;
}

export interface FeedFilter {
  types?: TypeFilter[];
  contactId?: string;
  from?: Date;
  to?: Date;
}

export interface FeedItemDto {
  id: string;
  type: string;
  name: string;
  contactId: string | null;
  email: string | null;
  data: Record<string, JsonValue>;
  createdAt: string;
}

const isReserved = (name: string) => RESERVED_EVENT_PREFIXES.some((p) => name.startsWith(p));
const likePrefix = (p: string) => `${p.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** SQL: the event `e` has a reserved (service-emitted) name. */
const RESERVED_SQL = `(${RESERVED_EVENT_PREFIXES.map((p) => `e.name like '${p}%'`).join(' or ')})`;
/** SQL: the feed type of event `e`. */
export const EVENT_TYPE_SQL = `case when ${RESERVED_SQL} then e.name else '${TRACKED_TYPE}' end`;

const typeMatches = (type: string, f: TypeFilter) => (f.prefix ? type.startsWith(f.value) : type === f.value);

/** The filter as a predicate on `events e`, or null when no event can match it. */
function eventTypePredicate(filters: TypeFilter[]): { sql: string; params: unknown[] } | null {
  const ors: string[] = [];
  const params: unknown[] = [];
  let tracked = false;
  for (const f of filters) {
    if (typeMatches(TRACKED_TYPE, f)) tracked = true;
    if (!f.prefix) {
      if (isReserved(f.value)) {
        ors.push('e.name = ?');
        params.push(f.value);
      }
    } else if (isReserved(f.value)) {
      // Every name under a reserved prefix is reserved, so a plain LIKE is exact.
      ors.push(`e.name like ? escape '\\'`);
      params.push(likePrefix(f.value));
    } else {
      // A prefix shorter than a reserved one ("e", "seg") takes whole reserved prefixes.
      for (const p of RESERVED_EVENT_PREFIXES) if (p.startsWith(f.value)) ors.push(`e.name like '${p}%'`);
    }
  }
  if (tracked) ors.push(`not ${RESERVED_SQL}`);
  return ors.length ? { sql: `(${ors.join(' or ')})`, params } : null;
}

/** One source of feed rows: a select of (type, name, id, contact_id, data, created_at). */
interface Branch {
  /** SQL of the row's feed type. */
  type: string;
  select: string;
  from: string;
  time: string;
  id: string;
  contact: string | null;
  where: string[];
  params: unknown[];
}

/** SQL: a timestamptz as JavaScript's toISOString() writes it (null stays null), whatever the session time zone. */
const isoSql = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function branches(projectId: string, filter: FeedFilter): Branch[] {
  const out: Branch[] = [];
  const types = filter.types;
  const wants = (type: DerivedType) => !types || types.some((f) => typeMatches(type, f));

  const events: Branch = {
    type: EVENT_TYPE_SQL,
    select: `${EVENT_TYPE_SQL} as type, e.name, e.id, e.contact_id, e.data, e.created_at`,
    from: 'events e',
    time: 'e.created_at',
    id: 'e.id',
    contact: 'e.contact_id',
    where: ['e.project_id = ?'],
    params: [projectId],
  };
  const typePredicate = types ? eventTypePredicate(types) : { sql: '', params: [] };
  if (typePredicate) {
    if (typePredicate.sql) {
      events.where.push(typePredicate.sql);
      events.params.push(...typePredicate.params);
    }
    out.push(events);
  }

  const execution = (type: DerivedType, suffix: string, time: string, extra: string[]): Branch => ({
    type: `'${type}'`,
    select: `'${type}' as type, '${type}' as name, x.id || '${suffix}' as id, x.contact_id,
      jsonb_build_object('executionId', x.id, 'workflowId', x.workflow_id, 'workflowName', w.name) as data, ${time} as created_at`,
    from: 'workflow_executions x join workflows w on w.id = x.workflow_id',
    time,
    id: `x.id || '${suffix}'`,
    contact: 'x.contact_id',
    where: ['x.project_id = ?', 'not x.test', ...extra],
    params: [projectId],
  });
  if (wants('workflow.started')) out.push(execution('workflow.started', ':started', 'x.started_at', []));
  if (wants('workflow.completed')) {
    out.push(execution('workflow.completed', ':completed', 'x.finished_at', [`x.status = 'COMPLETED'`, 'x.finished_at is not null']));
  }

  const campaign = (type: DerivedType, suffix: string, time: string, extra: string[]): Branch => ({
    type: `'${type}'`,
    select: `'${type}' as type, '${type}' as name, c.id || '${suffix}' as id, null::text as contact_id,
      jsonb_build_object('campaignId', c.id, 'campaignName', c.name, 'scheduledFor', ${isoSql('c.scheduled_for')},
        'totalRecipients', c.total_recipients) as data, ${time} as created_at`,
    from: 'campaigns c',
    time,
    id: `c.id || '${suffix}'`,
    contact: null,
    where: ['c.project_id = ?', ...extra],
    params: [projectId],
  });
  // Campaign items have no contact: a contact filter leaves them out.
  if (!filter.contactId) {
    if (wants('campaign.scheduled')) {
      out.push(campaign('campaign.scheduled', ':scheduled', 'coalesce(c.scheduled_at, c.created_at)', ['c.scheduled_for is not null']));
    }
    if (wants('campaign.sent')) out.push(campaign('campaign.sent', ':sent', 'c.sent_at', ['c.sent_at is not null']));
  }

  for (const b of out) {
    if (filter.contactId) {
      b.where.push(`${b.contact} = ?`);
      b.params.push(filter.contactId);
    }
    if (filter.from) {
      b.where.push(`${b.time} >= ?`);
      b.params.push(filter.from.toISOString());
    }
    if (filter.to) {
      b.where.push(`${b.time} < ?`);
      b.params.push(filter.to.toISOString());
    }
  }
  return out;
}

// --- Cursor: the (created_at, id) of the last item; created_at to the microsecond, as Postgres keeps it.

interface FeedCursor {
  at: string;
  id: string;
}

const CURSOR_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const encodeFeedCursor = (c: FeedCursor) => Buffer.from(JSON.stringify(c), 'utf8').toString('base64url');

function decodeFeedCursor(cursor: string): FeedCursor {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Partial<FeedCursor> | null;
    if (parsed && typeof parsed.at === 'string' && CURSOR_AT.test(parsed.at) && typeof parsed.id === 'string') {
      return { at: parsed.at, id: parsed.id };
    }
  } catch {
    // fall through
  }
  throw new AppError(400, 'INVALID_CURSOR', 'The cursor is not valid', {
    suggestion: 'Pass the cursor exactly as returned by the previous page, with the same filters, or omit it to start over.',
  });
}

interface FeedRow {
  type: string;
  name: string;
  id: string;
  contact_id: string | null;
  email: string | null;
  data: Record<string, JsonValue>;
  created_at: Date;
  cursor_at: string;
}

const whereOf = (b: Branch, extra: string[] = []) => [...b.where, ...extra].join(' and ');

/**
 * One page of the feed, newest first, ordered by (time, id) with both in the cursor. Each source
 * reads at most limit + 1 rows past the cursor in that order (events by an index on
 * (project_id, created_at, id)), and the union is cut to limit + 1: the extra row says whether
 * another page exists. `total` is counted on the first page only, like every cursor list.
 */
export async function listFeed(
  em: EntityManager,
  projectId: string,
  opts: FeedFilter & { limit: number; cursor?: string },
): Promise<CursorPage<FeedItemDto>> {
  const after = opts.cursor ? decodeFeedCursor(opts.cursor) : undefined;
  const sources = branches(projectId, opts);
  if (!sources.length) return { data: [], cursor: null, hasMore: false, total: 0 };

  const total = after
    ? 0
    : Number(
        (await queryOne<{ n: string }>(
          em,
          `select ${sources.map((b) => `(select count(*) from ${b.from} where ${whereOf(b)})`).join(' + ')} as n`,
          sources.flatMap((b) => b.params),
        ))!.n,
      );

  const params: unknown[] = [];
  const parts = sources.map((b) => {
    const keyset = after ? [`(${b.time}, ${b.id}) < (?::timestamptz, ?)`] : [];
    params.push(...b.params, ...(after ? [after.at, after.id] : []), opts.limit + 1);
    return `(select ${b.select} from ${b.from} where ${whereOf(b, keyset)} order by ${b.time} desc, ${b.id} desc limit ?)`;
  });
  const rows = await query<FeedRow>(
    em,
    `select a.type, a.name, a.id, a.contact_id, ct.email, a.data, a.created_at,
       to_char(a.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at
     from (${parts.join(' union all ')}) a left join contacts ct on ct.id = a.contact_id
     order by a.created_at desc, a.id desc limit ?`,
    [...params, opts.limit + 1],
  );
  return pageOfRows(
    rows,
    opts.limit,
    total,
    (last) => encodeFeedCursor({ at: last.cursor_at, id: last.id }),
    (r) => ({
      id: r.id,
      type: r.type,
      name: r.name,
      contactId: r.contact_id,
      email: r.email,
      data: r.data,
      createdAt: new Date(r.created_at).toISOString(),
    }),
  );
}

export interface FeedStats {
  total: number;
  last24h: number;
  last7d: number;
  byType: { type: string; count: number }[];
}

/** Counts per type of the feed items the filters select, and how many of them are from the last 24 hours / 7 days; one pass. */
export async function feedStats(em: EntityManager, projectId: string, filter: FeedFilter): Promise<FeedStats> {
  const sources = branches(projectId, filter);
  if (!sources.length) return { total: 0, last24h: 0, last7d: 0, byType: [] };
  const rows = await query<{ type: string; n: string; d1: string; d7: string }>(
    em,
    `select type, count(*) as n,
       count(*) filter (where t > now() - interval '24 hours') as d1,
       count(*) filter (where t > now() - interval '7 days') as d7
     from (${sources.map((b) => `select ${b.type} as type, ${b.time} as t from ${b.from} where ${whereOf(b)}`).join(' union all ')}) a
     group by type order by count(*) desc, type`,
    sources.flatMap((b) => b.params),
  );
  const byType = rows.map((r) => ({ type: r.type, count: Number(r.n), d1: Number(r.d1), d7: Number(r.d7) }));
  const sum = (pick: (r: (typeof byType)[number]) => number) => byType.reduce((acc, r) => acc + pick(r), 0);
  return {
    total: sum((r) => r.count),
    last24h: sum((r) => r.d1),
    last7d: sum((r) => r.d7),
    byType: byType.map(({ type, count }) => ({ type, count })),
  };
}

/** Feed items since `minutes` ago (for a live indicator), with the same type/contact filters as the feed. */
export async function recentFeedCount(
  em: EntityManager,
  projectId: string,
  opts: { minutes: number; types?: TypeFilter[]; contactId?: string },
  now = new Date(),
): Promise<{ count: number; since: string }> {
  const since = new Date(now.getTime() - opts.minutes * 60_000);
  const sources = branches(projectId, { types: opts.types, contactId: opts.contactId, from: since });
  if (!sources.length) return { count: 0, since: since.toISOString() };
  const row = await queryOne<{ n: string }>(
    em,
    `select ${sources.map((b) => `(select count(*) from ${b.from} where ${whereOf(b)})`).join(' + ')} as n`,
    sources.flatMap((b) => b.params),
  );
  return { count: Number(row!.n), since: since.toISOString() };
}

/** The types that occur in the project's feed, sorted. */
export async function feedTypes(em: EntityManager, projectId: string): Promise<string[]> {
  const rows = await query<{ type: string }>(
    em,
    `select distinct ${EVENT_TYPE_SQL} as type from events e where e.project_id = ?
     union select 'workflow.started' where exists (select 1 from workflow_executions where project_id = ? and not test)
     union select 'workflow.completed' where exists (
       select 1 from workflow_executions where project_id = ? and status = 'COMPLETED' and finished_at is not null and not test)
     union select 'campaign.scheduled' where exists (select 1 from campaigns where project_id = ? and scheduled_for is not null)
     union select 'campaign.sent' where exists (select 1 from campaigns where project_id = ? and sent_at is not null)
     order by 1`,
    [projectId, projectId, projectId, projectId, projectId],
  );
  return rows.map((r) => r.type);
}

export interface Upcoming {
  campaigns: { id: string; name: string; scheduledFor: string }[];
  executions: {
    id: string;
    workflowId: string;
    workflowName: string;
    contactId: string;
    email: string | null;
    waitingForEvent: string | null;
    currentStepId: string | null;
    startedAt: string;
    waitingSince: string;
  }[];
}

/**
 * SCHEDULED campaigns (soonest first) and WAITING executions (a DELAY or WAIT_FOR_EVENT step holds
 * them; longest waiting first: the execution row is updated when its current step begins).
 */
export async function upcomingFeed(em: EntityManager, projectId: string, limit: number): Promise<Upcoming> {
  const campaigns = await query<{ id: string; name: string; scheduled_for: Date }>(
    em,
    `select id, name, scheduled_for from campaigns where project_id = ? and status = 'SCHEDULED'
     order by scheduled_for, id limit ?`,
    [projectId, limit],
  );
  const executions = await query<{
    id: string;
    workflow_id: string;
    workflow_name: string;
    contact_id: string;
    email: string | null;
    waiting_for_event: string | null;
    current_step_id: string | null;
    started_at: Date;
    updated_at: Date;
  }>(
    em,
    `select x.id, x.workflow_id, w.name as workflow_name, x.contact_id, c.email, x.waiting_for_event, x.current_step_id,
       x.started_at, x.updated_at
     from workflow_executions x join workflows w on w.id = x.workflow_id left join contacts c on c.id = x.contact_id
     where x.project_id = ? and x.status = 'WAITING' and not x.test order by x.updated_at, x.id limit ?`,
    [projectId, limit],
  );
  return {
    campaigns: campaigns.map((c) => ({ id: c.id, name: c.name, scheduledFor: new Date(c.scheduled_for).toISOString() })),
    executions: executions.map((x) => ({
      id: x.id,
      workflowId: x.workflow_id,
      workflowName: x.workflow_name,
      contactId: x.contact_id,
      email: x.email,
      waitingForEvent: x.waiting_for_event,
      currentStepId: x.current_step_id,
      startedAt: new Date(x.started_at).toISOString(),
      waitingSince: new Date(x.updated_at).toISOString(),
    })),
  };
}
