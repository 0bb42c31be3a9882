import { campaignStats, DEFAULT_METRICS, timeseries, topCampaigns, topEvents, zonedMidnight } from '../../db/insights/analytics';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { isDateOnly, toInstant } from '../schemas/feed';
import {
  campaignStatsQuery,
  campaignStatsResponse,
  timeseriesQuery,
  timeseriesResponse,
  topCampaignsQuery,
  topCampaignsResponse,
  topEventsQuery,
  topEventsResponse,
} from '../schemas/analytics';

const instant = (s: string | undefined) => (s === undefined ? undefined : toInstant(s));

/** Email engagement over time, per campaign, and the most frequent events (db/insights/analytics.ts). */
export function registerAnalyticsRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/analytics/timeseries',
    tag: 'Analytics',
    summary: 'Email sends, deliveries, opens, clicks, bounces and complaints per hour, day, week or month; every bucket present, empty ones as 0',
    auth: 'secret',
    query: timeseriesQuery,
    response: timeseriesResponse,
    handler: ({ scope, project, query }) => {
      // A date-only from/to is midnight in the requested zone, like the buckets.
      const at = (s: string | undefined) => (s === undefined ? null : isDateOnly(s) ? zonedMidnight(s, query.timezone) : toInstant(s));
      return timeseries(scope.em, project.id, {
        metrics: query.metric ?? DEFAULT_METRICS,
        interval: query.interval,
        timezone: query.timezone,
        from: at(query.from),
        to: at(query.to),
        campaignId: query.campaignId,
      });
    },
  });

  api.add({
    method: 'get',
    path: '/analytics/top-campaigns',
    tag: 'Analytics',
    summary: 'Campaigns ranked by emails sent, opened or clicked, with their stats',
    auth: 'secret',
    query: topCampaignsQuery,
    response: topCampaignsResponse,
    handler: ({ scope, project, query }) =>
      topCampaigns(scope.em, project.id, { metric: query.metric, limit: query.limit, from: instant(query.from), to: instant(query.to) }),
  });

  api.add({
    method: 'get',
    path: '/analytics/campaign-stats',
    tag: 'Analytics',
    summary: 'Per-campaign breakdown: sent, delivered, opened, clicked, bounced, complained and rates (one campaign, or the newest)',
    auth: 'secret',
    query: campaignStatsQuery,
    response: campaignStatsResponse,
    handler: ({ scope, project, query }) => campaignStats(scope.em, project.id, { campaignId: query.campaignId, limit: query.limit }),
  });

  api.add({
    method: 'get',
    path: '/analytics/top-events',
    tag: 'Analytics',
    summary: 'Most frequent event names, optionally in a date range',
    auth: 'secret',
    query: topEventsQuery,
    response: topEventsResponse,
    handler: ({ scope, project, query }) =>
      topEvents(scope.em, project.id, { limit: query.limit, kind: query.kind, from: instant(query.from), to: instant(query.to) }),
  });
}
