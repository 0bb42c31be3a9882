import { type ReactNode, useId, useState } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, Line, LineChart, Tooltip, XAxis, YAxis } from 'recharts';
import { TableScroll } from './TableScroll';
import './SeriesChart.css';

/**
 * Counts over time (GET /analytics/timeseries) as a chart with labelled axes, and the same numbers
 * as a table for those who cannot see the chart. Only the lazily loaded analytics and campaign
 * pages import this module, so recharts stays out of the first download.
 */

export type Interval = 'hour' | 'day' | 'week' | 'month';

export interface SeriesMetric {
  key: string;
  label: string;
  color: string;
}

/** The metrics of GET /analytics/timeseries, in the order a send goes through them; colours tell them apart on white. */
export const EMAIL_METRICS: SeriesMetric[] = [
  { key: 'sends', label: 'Sent', color: '#1d4ed8' },
  { key: 'deliveries', label: 'Delivered', color: '#0e7490' },
  { key: 'opens', label: 'Opened', color: '#116b3a' },
  { key: 'clicks', label: 'Clicked', color: '#7c3aed' },
  { key: 'bounces', label: 'Bounced', color: '#b45309' },
  { key: 'complaints', label: 'Complained', color: '#b42318' },
];

/** A bucket of GET /analytics/timeseries: its start and a count per requested metric. */
export interface SeriesPoint {
  bucket: string;
  [metric: string]: string | number | undefined;
}

const countOf = (point: SeriesPoint, key: string): number => {
  const value = point[key];
  return typeof value === 'number' ? value : 0;
};

const INTERVAL_NAME: Record<Interval, string> = { hour: 'Hour', day: 'Day', week: 'Week starting', month: 'Month' };

/** A bucket's start as people read it, in the zone the buckets follow. */
export function bucketLabel(iso: string, interval: Interval, timeZone: string, withDate = true): string {
  const date = new Date(iso);
  const options: Intl.DateTimeFormatOptions =
    interval === 'hour'
      ? withDate
        ? { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }
        : { hour: '2-digit', minute: '2-digit' }
      : interval === 'month'
        ? { month: 'short', year: 'numeric' }
        : { month: 'short', day: 'numeric' };
  return new Intl.DateTimeFormat(undefined, { ...options, timeZone }).format(date);
}

export function SeriesChart({
  title,
  data,
  metrics,
  interval,
  timeZone,
  kind = 'line',
}: {
  title: string;
  data: SeriesPoint[];
  metrics: SeriesMetric[];
  interval: Interval;
  timeZone: string;
  kind?: 'line' | 'bar';
}) {
  const captionId = useId();
  const [showTable, setShowTable] = useState(false);
  const spansDays = data.length > 1 && new Date(data[data.length - 1]!.bucket).getTime() - new Date(data[0]!.bucket).getTime() >= 86_400_000;
  const rows = data.map((point) => ({ ...point, label: bucketLabel(point.bucket, interval, timeZone, interval !== 'hour' || spansDays) }));
  const xLabel = `${INTERVAL_NAME[interval]} (${timeZone})`;
  const summary = metrics.map((m) => `${m.label} ${data.reduce((sum, p) => sum + countOf(p, m.key), 0).toLocaleString()}`).join(', ');

  // Legend and tooltip list the metrics in the order given, not alphabetically.
  const order = (key: unknown) => metrics.findIndex((m) => m.key === key);
  const common = {
    data: rows,
    responsive: true,
    style: { width: '100%', height: '100%' },
    margin: { top: 8, right: 12, bottom: 28, left: 4 },
    title,
    desc: `${title}: ${data.length} ${interval} buckets. Totals: ${summary}. The table below the chart has every number.`,
  };
  const axes = (
    <>
      <CartesianGrid strokeDasharray="3 3" stroke="#d9dde3" />
      <XAxis dataKey="label" tick={{ fontSize: 12, fill: '#5b6470' }} minTickGap={16} label={{ value: xLabel, position: 'insideBottom', offset: -18, fill: '#5b6470', fontSize: 12 }} />
      <YAxis allowDecimals={false} width={52} tick={{ fontSize: 12, fill: '#5b6470' }} label={{ value: 'Emails', angle: -90, position: 'insideLeft', offset: 12, fill: '#5b6470', fontSize: 12 }} />
      <Tooltip itemSorter={(item) => order(item.dataKey)} />
      <Legend verticalAlign="top" wrapperStyle={{ fontSize: 13 }} itemSorter={(item) => order(item.dataKey)} />
    </>
  );

  return (
    <figure className="series-chart" aria-labelledby={captionId}>
      <figcaption id={captionId} className="series-chart-caption">
        {title}
      </figcaption>
      <div className="series-chart-area">
        {kind === 'bar' ? (
          <BarChart {...common}>
            {axes}
            {metrics.map((m) => (
              <Bar key={m.key} dataKey={m.key} name={m.label} fill={m.color} isAnimationActive={false} maxBarSize={28} />
            ))}
          </BarChart>
        ) : (
          <LineChart {...common}>
            {axes}
            {metrics.map((m) => (
              <Line
                key={m.key}
                type="monotone"
                dataKey={m.key}
                name={m.label}
                stroke={m.color}
                strokeWidth={2}
                dot={rows.length <= 31}
                isAnimationActive={false}
              />
            ))}
          </LineChart>
        )}
      </div>
      <button type="button" className="button-small" aria-expanded={showTable} onClick={() => setShowTable((v) => !v)}>
        {showTable ? 'Hide the numbers' : 'Show the numbers as a table'}
      </button>
      {/* The table stays in the page when hidden, so screen readers always have the numbers. */}
      <NumbersFrame shown={showTable} label={title}>
        <table>
          <caption>{title}</caption>
          <thead>
            <tr>
              <th scope="col">{xLabel}</th>
              {metrics.map((m) => (
                <th key={m.key} scope="col">
                  {m.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.bucket}>
                <th scope="row">{bucketLabel(row.bucket, interval, timeZone)}</th>
                {metrics.map((m) => (
                  <td key={m.key}>{countOf(row, m.key).toLocaleString()}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </NumbersFrame>
    </figure>
  );
}

/** Shown, the table scrolls inside its own frame like any other; hidden, it is there for screen readers only. */
function NumbersFrame({ shown, label, children }: { shown: boolean; label: string; children: ReactNode }) {
  return shown ? (
    <TableScroll label={label} className="series-chart-table">
      {children}
    </TableScroll>
  ) : (
    <div className="visually-hidden">{children}</div>
  );
}
