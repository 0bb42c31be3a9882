import { feedStats, feedTypes, listFeed, recentFeedCount, upcomingFeed } from '../../db/insights/feed';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage } from '../schemas/common';
import {
  feedItemSchema,
  feedStatsQuery,
  feedStatsResponse,
  feedTypesResponse,
  listFeedQuery,
  recentCountQuery,
  recentCountResponse,
  toInstant,
  upcomingQuery,
  upcomingResponse,
} from '../schemas/feed';

const range = (q: { from?: string; to?: string }) => ({
  from: q.from === undefined ? undefined : toInstant(q.from),
  to: q.to === undefined ? undefined : toInstant(q.to),
});

/**
 * The activity feed (`/activity`, docs/design.md) and its aggregates: a read-only view over events,
 * journey executions and campaigns (db/insights/feed.ts).
 */
export function registerFeedRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/activity',
    tag: 'Activity',
    summary: 'Activity feed, newest first (cursor pagination; filter by `type`, `contactId`, `from`/`to`)',
    auth: 'secret',
    query: listFeedQuery,
    response: cursorPage(feedItemSchema),
    handler: ({ scope, project, query }) =>
      listFeed(scope.em, project.id, {
        limit: query.limit,
        cursor: query.cursor,
        types: query.type,
        contactId: query.contactId,
        ...range(query),
      }),
  });

  api.add({
    method: 'get',
    path: '/activity/stats',
    tag: 'Activity',
    summary: 'Activity counts: in all, last 24 hours, last 7 days, and per type (same filters as the feed)',
    auth: 'secret',
    query: feedStatsQuery,
    response: feedStatsResponse,
    handler: ({ scope, project, query }) =>
      feedStats(scope.em, project.id, { types: query.type, contactId: query.contactId, ...range(query) }),
  });

  api.add({
    method: 'get',
    path: '/activity/recent-count',
    tag: 'Activity',
    summary: 'Activity in the last `minutes` (default 5), for a live indicator',
    auth: 'secret',
    query: recentCountQuery,
    response: recentCountResponse,
    handler: ({ scope, project, query }) =>
      recentFeedCount(scope.em, project.id, { minutes: query.minutes, types: query.type, contactId: query.contactId }),
  });

  api.add({
    method: 'get',
    path: '/activity/types',
    tag: 'Activity',
    summary: 'Distinct activity types that occur in the project',
    auth: 'secret',
    response: feedTypesResponse,
    handler: async ({ scope, project }) => ({ types: await feedTypes(scope.em, project.id) }),
  });

  api.add({
    method: 'get',
    path: '/activity/upcoming',
    tag: 'Activity',
    summary: 'Scheduled campaigns and waiting workflow executions',
    auth: 'secret',
    query: upcomingQuery,
    response: upcomingResponse,
    handler: ({ scope, project, query }) => upcomingFeed(scope.em, project.id, query.limit),
  });
}
