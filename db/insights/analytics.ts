import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound, validationError } from '../../errors';
import { CAMPAIGN_COUNTS, type CampaignStats as Stats } from '../campaigns/campaigns';
import { RESERVED_EVENT_PREFIXES } from '../events/events';
import { query, queryOne } from '../sql';

/**
 * Figures over the `emails` engagement columns (sent_at, delivered_at, opened_at, clicked_at,
 * bounced_at, complained_at: first time of each, db/messages/engagement.ts) and over `events`.
 * An email counts once per fact: "opens" are emails opened (at their first open), not pixel hits.
 */

export const METRICS = ['sends', 'deliveries', 'opens', 'clicks', 'bounces', 'complaints'] as const;
export type Metric = (typeof METRICS)[number];
export const INTERVALS = ['hour', 'day', 'week', 'month'] as const;
export type Interval = (typeof INTERVALS)[number];
export const MAX_BUCKETS = 1000;

/** The send, open and click series the spec names; the other metrics are asked for by name (or `all`). */
export const DEFAULT_METRICS: readonly Metric[] = ['sends', 'opens', 'clicks'];

const METRIC_COLUMN: Record<Metric, string> = {
  sends: 'sent_at',
  deliveries: 'delivered_at',
  opens: 'opened_at',
  clicks: 'clicked_at',
  bounces: 'bounced_at',
  complaints: 'complained_at',
};
/** Buckets shown when `from` is omitted. */
const DEFAULT_BUCKETS: Record<Interval, number> = { hour: 24, day: 30, week: 12, month: 12 };
/** Nominal bucket lengths: a cheap bound on an explicit range before Postgres counts exactly. */
const NOMINAL_MS: Record<Interval, number> = { hour: 3_600_000, day: 86_400_000, week: 604_800_000, month: 2_592_000_000 };

/** Offset (ms) of `tz` from UTC at the instant `utcMs`. */
function offsetAt(utcMs: number, tz: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(new Date(utcMs));
  const get = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  const wall = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return wall - Math.floor(utcMs / 1000) * 1000;
}

/** The instant of midnight starting `date` (YYYY-MM-DD) in `tz`. */
export function zonedMidnight(date: string, tz: string): Date {
  const wall = Date.parse(`${date}T00:00:00Z`);
  const guess = wall - offsetAt(wall, tz);
  return new Date(wall - offsetAt(guess, tz));
}

export interface SeriesRequest {
  metrics: readonly Metric[];
  interval: Interval;
  timezone: string;
  /** Instants, or null for the defaults (to: now; from: DEFAULT_BUCKETS buckets back, aligned to a bucket start). */
  from: Date | null;
  to: Date | null;
  campaignId?: string;
}

export type SeriesPoint = { bucket: string } & Partial<Record<Metric, number>>;

export interface Series {
  interval: Interval;
  timezone: string;
  from: string;
  to: string;
  series: SeriesPoint[];
  totals: Partial<Record<Metric, number>>;
}

async function assertCampaign(em: EntityManager, projectId: string, campaignId: string): Promise<void> {
  const row = await queryOne(em, 'select 1 from campaigns where id = ? and project_id = ?', [campaignId, projectId]);
  if (!row) throw notFound('campaign');
}

/**
 * Counts per bucket, every bucket present (generate_series, gaps as 0). Buckets are wall-clock
 * periods in `timezone`: `date_trunc` of the local time, turned back into an instant for output.
 * Only rows with from ≤ time < to count, so a `from` inside a bucket makes that bucket partial.
 */
export async function timeseries(em: EntityManager, projectId: string, req: SeriesRequest, now = new Date()): Promise<Series> {
  const to = req.to ?? now;
  if (req.from && to.getTime() <= req.from.getTime()) {
    throw validationError([
      req.to
        ? { field: 'query.to', message: '`to` must be after `from`', code: 'custom' }
        : { field: 'query.from', message: '`from` must be in the past (`to` defaults to now)', code: 'custom' },
    ]);
  }
  const tooMany = () =>
    validationError([
      {
        field: 'query.from',
        message: `The range spans more than ${MAX_BUCKETS} ${req.interval} buckets; narrow it or use a larger interval`,
        code: 'too_big',
      },
    ]);
  if (req.from && (to.getTime() - req.from.getTime()) / NOMINAL_MS[req.interval] > MAX_BUCKETS + 2) throw tooMany();
  if (req.campaignId) await assertCampaign(em, projectId, req.campaignId);

  const { interval, timezone: tz } = req;
  const filter = req.campaignId ? ' and e.campaign_id = ?' : '';
  const params: unknown[] = [
    to.toISOString(),
    req.from ? req.from.toISOString() : null,
    interval,
    tz,
    `${DEFAULT_BUCKETS[interval] - 1} ${interval}`,
    tz,
    interval,
    tz,
    interval,
    tz,
    `1 ${interval}`,
  ];
  const ctes = req.metrics.map((m) => {
    params.push(interval, tz, projectId, ...(req.campaignId ? [req.campaignId] : []));
    const col = METRIC_COLUMN[m];
    return `, m_${m} as (
      select date_trunc(?, e.${col} at time zone ?) as b, count(*) as n from emails e, r
      where e.project_id = ?${filter} and e.${col} >= r.t_from and e.${col} < r.t_to group by 1)`;
  });
  const rows = await query<{ bucket: Date; t_from: Date; t_to: Date } & Record<string, string>>(
    em,
    `with t as (select ?::timestamptz as t_to),
     r as (
       select coalesce(?::timestamptz,
         (date_trunc(?, (t.t_to - interval '1 microsecond') at time zone ?) - ?::interval) at time zone ?) as t_from,
         t.t_to
       from t),
     g as (
       select b from r, generate_series(date_trunc(?, r.t_from at time zone ?), date_trunc(?, (r.t_to - interval '1 microsecond') at time zone ?), ?::interval) b)
     ${ctes.join('')}
     select g.b at time zone ? as bucket, r.t_from, r.t_to
       ${req.metrics.map((m) => `, coalesce(m_${m}.n, 0) as ${m}`).join('')}
     from g cross join r ${req.metrics.map((m) => `left join m_${m} on m_${m}.b = g.b`).join(' ')}
     order by g.b`,
    [...params, tz],
  ).catch((err: unknown) => {
    // A zone the runtime knows but this Postgres does not (older tzdata).
    if ((err as { code?: string }).code === '22023' && /time zone/i.test(String((err as Error).message))) {
      throw validationError([{ field: 'query.timezone', message: `Time zone "${tz}" is not recognized by the database`, code: 'custom' }]);
    }
    throw err;
  });
  if (rows.length > MAX_BUCKETS) throw tooMany();
  const totals: Partial<Record<Metric, number>> = {};
  for (const m of req.metrics) totals[m] = 0;
  const series = rows.map((row) => {
    const point: SeriesPoint = { bucket: new Date(row.bucket).toISOString() };
    for (const m of req.metrics) {
      const n = Number(row[m]);
      point[m] = n;
      totals[m]! += n;
    }
    return point;
  });
  const first = rows[0];
  return {
    interval: req.interval,
    timezone: tz,
    from: (first ? new Date(first.t_from) : req.from ?? to).toISOString(),
    to: to.toISOString(),
    series,
    totals,
  };
}

/** A campaign's own stats (db/campaigns/campaigns.ts) with what identifies it in a ranking. */
export interface CampaignStats extends Stats {
  id: string;
  name: string;
  status: string;
  sentAt: string | null;
}

interface CampaignStatsRow {
  id: string;
  name: string;
  status: string;
  sent_at: Date | null;
  total_recipients: number;
  sent: string;
  delivered: string;
  opened: string;
  clicked: string;
  bounced: string;
  complained: string;
  unsubscribed: string;
}

/** A fraction of `sent` with four decimals, 0 when nothing was sent: as GET /campaigns/:id reports it (db/campaigns/campaigns.ts). */
const rate = (n: number, of: number) => (of > 0 ? Math.round((n / of) * 10_000) / 10_000 : 0);

const toStats = (r: CampaignStatsRow): CampaignStats => {
  const sent = Number(r.sent);
  const n = (v: string) => Number(v);
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    sentAt: r.sent_at ? new Date(r.sent_at).toISOString() : null,
    totalRecipients: r.total_recipients,
    sent,
    delivered: n(r.delivered),
    opened: n(r.opened),
    clicked: n(r.clicked),
    bounced: n(r.bounced),
    complained: n(r.complained),
    unsubscribed: n(r.unsubscribed),
    openRate: rate(n(r.opened), sent),
    clickRate: rate(n(r.clicked), sent),
    bounceRate: rate(n(r.bounced), sent),
  };
};

/**
 * Per-campaign counts of its emails (emails.campaign_id, indexed), joined to the campaigns `c`
 * selected by `where`, with the campaign stats' own definitions (db/campaigns/campaigns.ts).
 */
const statsSql = (where: string, order: string) => `
  select c.id, c.name, c.status, c.sent_at, c.total_recipients,
    coalesce(s.sent, 0) as sent, coalesce(s.delivered, 0) as delivered, coalesce(s.opened, 0) as opened,
    coalesce(s.clicked, 0) as clicked, coalesce(s.bounced, 0) as bounced, coalesce(s.complained, 0) as complained,
    coalesce(s.unsubscribed, 0) as unsubscribed
  from campaigns c
  left join lateral (
    select ${CAMPAIGN_COUNTS}
    from emails e left join contacts ct on ct.id = e.contact_id
    where e.campaign_id = c.id and e.project_id = c.project_id
  ) s on true
  where ${where}
  ${order}`;

/** One campaign, or the newest `limit` campaigns of the project. */
export async function campaignStats(
  em: EntityManager,
  projectId: string,
  opts: { campaignId?: string; limit: number },
): Promise<{ campaigns: CampaignStats[] }> {
  if (opts.campaignId) {
    const rows = await query<CampaignStatsRow>(em, statsSql('c.project_id = ? and c.id = ?', ''), [projectId, opts.campaignId]);
    if (!rows.length) throw notFound('campaign');
    return { campaigns: rows.map(toStats) };
  }
  const rows = await query<CampaignStatsRow>(em, statsSql('c.project_id = ?', 'order by c.created_at desc, c.id desc limit ?'), [
    projectId,
    opts.limit,
  ]);
  return { campaigns: rows.map(toStats) };
}

export const TOP_CAMPAIGN_METRICS = ['sent', 'opens', 'clicks'] as const;
export type TopCampaignMetric = (typeof TOP_CAMPAIGN_METRICS)[number];
const TOP_ORDER: Record<TopCampaignMetric, string> = { sent: 'sent', opens: 'opened', clicks: 'clicked' };

/**
 * Campaigns ranked by a metric; only those that sent at least one email. `from`/`to` select
 * campaigns by sent_at. Counting goes per campaign of the project (its emails by campaign_id),
 * so the cost follows the project's campaigns, not its whole email history.
 */
export async function topCampaigns(
  em: EntityManager,
  projectId: string,
  opts: { metric: TopCampaignMetric; limit: number; from?: Date; to?: Date },
): Promise<{ metric: TopCampaignMetric; campaigns: CampaignStats[] }> {
  const where = ['c.project_id = ?'];
  const params: unknown[] = [projectId];
  if (opts.from) {
    where.push('c.sent_at >= ?');
    params.push(opts.from.toISOString());
  }
  if (opts.to) {
    where.push('c.sent_at < ?');
    params.push(opts.to.toISOString());
  }
  const col = TOP_ORDER[opts.metric];
  const rows = await query<CampaignStatsRow>(
    em,
    `select * from (${statsSql(where.join(' and '), '')}) x where x.sent > 0
     order by x.${col} desc, x.sent_at desc nulls last, x.id desc limit ?`,
    [...params, opts.limit],
  );
  return { metric: opts.metric, campaigns: rows.map(toStats) };
}

const RESERVED_SQL = `(${RESERVED_EVENT_PREFIXES.map((p) => `name like '${p}%'`).join(' or ')})`;

/** The most frequent event names in the range; `kind` keeps tracked (client) or emitted (service) names only. */
export async function topEvents(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; from?: Date; to?: Date; kind: 'all' | 'tracked' | 'emitted' },
): Promise<{ events: { name: string; count: number }[] }> {
  const where = ['project_id = ?'];
  const params: unknown[] = [projectId];
  if (opts.from) {
    where.push('created_at >= ?');
    params.push(opts.from.toISOString());
  }
  if (opts.to) {
    where.push('created_at < ?');
    params.push(opts.to.toISOString());
  }
  if (opts.kind === 'tracked') where.push(`not ${RESERVED_SQL}`);
  if (opts.kind === 'emitted') where.push(RESERVED_SQL);
  const rows = await query<{ name: string; n: string }>(
    em,
    `select name, count(*) as n from events where ${where.join(' and ')} group by name order by count(*) desc, name limit ?`,
    [...params, opts.limit],
  );
  return { events: rows.map((r) => ({ name: r.name, count: Number(r.n) })) };
}
