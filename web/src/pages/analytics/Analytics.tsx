import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../api/client';
import { useProject } from '../../app/project';
import { formatPercent, READER_TIME_ZONE } from '../../components/format';
import { EMAIL_METRICS, type Interval, SeriesChart, type SeriesPoint } from '../../components/SeriesChart';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, Loading, PageHeader, SelectField } from '../../components/ui';
import './analytics.css';

type Period = '24h' | '7d' | '30d' | '90d' | '12m';

const PERIODS: Array<{ id: Period; label: string; interval: Interval }> = [
  { id: '24h', label: 'Last 24 hours', interval: 'hour' },
  { id: '7d', label: 'Last 7 days', interval: 'day' },
  { id: '30d', label: 'Last 30 days', interval: 'day' },
  { id: '90d', label: 'Last 90 days', interval: 'day' },
  { id: '12m', label: 'Last 12 months', interval: 'month' },
];

/** The period's first instant, at a bucket start on the reader's clock (the buckets follow the same zone). */
function periodStart(period: Period, now = new Date()): Date {
  const start = new Date(now);
  if (period === '24h') {
    start.setMinutes(0, 0, 0);
    start.setHours(start.getHours() - 23);
    return start;
  }
  start.setHours(0, 0, 0, 0);
  if (period === '12m') {
    start.setDate(1);
    start.setMonth(start.getMonth() - 11);
    return start;
  }
  start.setDate(start.getDate() - ({ '7d': 6, '30d': 29, '90d': 89 } as const)[period]);
  return start;
}

interface Series {
  interval: Interval;
  timezone: string;
  from: string;
  to: string;
  series: SeriesPoint[];
  totals: Record<string, number>;
}

interface CampaignFigures {
  id: string;
  name: string;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  openRate: number;
  clickRate: number;
}

/** How the project's mail fares over a period: counts over time, the leading campaigns, the most frequent events. */
export default function Analytics() {
  const { projectId } = useProject();
  const [period, setPeriod] = useState<Period>('30d');
  const [shown, setShown] = useState<string[]>(EMAIL_METRICS.map((m) => m.key));
  const [rankBy, setRankBy] = useState<'sent' | 'opens' | 'clicks'>('sent');
  const [kind, setKind] = useState<'all' | 'tracked' | 'emitted'>('all');
  const { interval, label } = PERIODS.find((p) => p.id === period)!;
  const from = useMemo(() => periodStart(period).toISOString(), [period]);

  const series = useQuery({
    queryKey: ['analytics-series', projectId, interval, from],
    queryFn: () => api<Series>('/analytics/timeseries', { query: { metric: 'all', interval, from, timezone: READER_TIME_ZONE } }),
    placeholderData: keepPreviousData,
    refetchInterval: 60_000,
  });
  const campaigns = useQuery({
    queryKey: ['analytics-top-campaigns', projectId, rankBy, from],
    queryFn: () => api<{ campaigns: CampaignFigures[] }>('/analytics/top-campaigns', { query: { metric: rankBy, from, limit: 10 } }),
    placeholderData: keepPreviousData,
  });
  const events = useQuery({
    queryKey: ['analytics-top-events', projectId, kind, from],
    queryFn: () => api<{ events: Array<{ name: string; count: number }> }>('/analytics/top-events', { query: { kind, from, limit: 10 } }),
    placeholderData: keepPreviousData,
  });

  const totals = series.data?.totals;
  return (
    <>
      <PageHeader title="Analytics" description={`Email sent by this project and what became of it, on your clock (${READER_TIME_ZONE}).`} />
      <div className="analytics-controls">
        <SelectField label="Period" value={period} onChange={(e) => setPeriod(e.target.value as Period)}>
          {PERIODS.map((p) => (
            <option key={p.id} value={p.id}>
              {p.label}
            </option>
          ))}
        </SelectField>
      </div>
      <ErrorNotice error={series.error} />
      <section aria-labelledby="totals-heading">
        <h2 id="totals-heading">{label}</h2>
        {totals ? (
          <div className="stat-row" aria-busy={series.isFetching}>
            {EMAIL_METRICS.map((m) => (
              <div key={m.key} className="stat">
                <span className="muted">{m.label}</span>
                <span className="value" data-metric={m.key}>
                  {(totals[m.key] ?? 0).toLocaleString()}
                </span>
              </div>
            ))}
          </div>
        ) : series.isPending ? (
          <Loading label="Loading figures…" />
        ) : null}
      </section>

      <section className="card" aria-labelledby="series-heading">
        <h2 id="series-heading">Over time</h2>
        <fieldset className="metric-toggles">
          <legend>Show</legend>
          {EMAIL_METRICS.map((m) => (
            <label key={m.key}>
              <input
                type="checkbox"
                checked={shown.includes(m.key)}
                onChange={(e) => setShown(e.target.checked ? EMAIL_METRICS.map((x) => x.key).filter((k) => k === m.key || shown.includes(k)) : shown.filter((k) => k !== m.key))}
              />{' '}
              <span className="swatch" style={{ background: m.color }} aria-hidden="true" /> {m.label}
            </label>
          ))}
        </fieldset>
        {series.data ? (
          <SeriesChart
            title={`Emails per ${series.data.interval}, ${label.toLowerCase()}`}
            data={series.data.series}
            metrics={EMAIL_METRICS.filter((m) => shown.includes(m.key))}
            interval={series.data.interval}
            timeZone={series.data.timezone}
          />
        ) : null}
      </section>

      <div className="grid-2">
        <section className="card" aria-labelledby="top-campaigns-heading">
          <h2 id="top-campaigns-heading">Top campaigns</h2>
          <SelectField label="Rank by" value={rankBy} onChange={(e) => setRankBy(e.target.value as typeof rankBy)} hint="Campaigns that finished sending in the period.">
            <option value="sent">Emails sent</option>
            <option value="opens">Opens</option>
            <option value="clicks">Clicks</option>
          </SelectField>
          <ErrorNotice error={campaigns.error} />
          {campaigns.data ? (
            campaigns.data.campaigns.length === 0 ? (
              <EmptyState>No campaign finished sending in this period.</EmptyState>
            ) : (
              <TableScroll label="Campaigns ranked">
                <table className="top-campaigns">
                  <caption className="visually-hidden">Top campaigns by {rankBy === 'sent' ? 'emails sent' : rankBy}</caption>
                  <thead>
                    <tr>
                      <th scope="col">Campaign</th>
                      <th scope="col">Sent</th>
                      <th scope="col">Opened</th>
                      <th scope="col">Clicked</th>
                      <th scope="col">Bounced</th>
                    </tr>
                  </thead>
                  <tbody>
                    {campaigns.data.campaigns.map((c) => (
                      <tr key={c.id}>
                        <th scope="row">
                          <Link to={`/p/${projectId}/campaigns/${c.id}`}>{c.name}</Link>
                        </th>
                        <td>{c.sent.toLocaleString()}</td>
                        <td>
                          {c.opened.toLocaleString()} <span className="muted">({formatPercent(c.openRate)})</span>
                        </td>
                        <td>
                          {c.clicked.toLocaleString()} <span className="muted">({formatPercent(c.clickRate)})</span>
                        </td>
                        <td>{c.bounced.toLocaleString()}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableScroll>
            )
          ) : campaigns.isPending ? (
            <Loading />
          ) : null}
        </section>

        <section className="card" aria-labelledby="top-events-heading">
          <h2 id="top-events-heading">Top events</h2>
          <SelectField label="Events" value={kind} onChange={(e) => setKind(e.target.value as typeof kind)}>
            <option value="all">All events</option>
            <option value="tracked">Tracked by your app</option>
            <option value="emitted">Recorded by Tidings</option>
          </SelectField>
          <ErrorNotice error={events.error} />
          {events.data ? (
            events.data.events.length === 0 ? (
              <EmptyState>No events in this period.</EmptyState>
            ) : (
              <TopEvents events={events.data.events} />
            )
          ) : events.isPending ? (
            <Loading />
          ) : null}
        </section>
      </div>
    </>
  );
}

function TopEvents({ events }: { events: Array<{ name: string; count: number }> }) {
  const max = Math.max(...events.map((e) => e.count), 1);
  return (
    <TableScroll label="Counts per event">
      <table className="top-events">
        <caption className="visually-hidden">Most frequent events</caption>
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Count</th>
          </tr>
        </thead>
        <tbody>
          {events.map((e) => (
            <tr key={e.name}>
              <th scope="row">
                <code>{e.name}</code>
                <span className="event-bar" style={{ width: `${(e.count / max) * 100}%` }} aria-hidden="true" />
              </th>
              <td>{e.count.toLocaleString()}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableScroll>
  );
}
