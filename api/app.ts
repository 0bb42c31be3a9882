import express, { type Express } from 'express';
import type { AppDeps } from './context';
import { authenticate, requestScope } from './middleware/auth';
import { errorHandler, notFoundHandler } from './middleware/errors';
import { rateLimit } from './middleware/rate-limit';
import { requestLog } from './middleware/request-log';
import { registerAnalyticsRoutes } from './routes/analytics';
import { registerBillingRoutes } from './routes/billing';
import { registerAuthRoutes } from './routes/auth';
import { registerOAuthRoutes } from './routes/oauth';
import { registerBulkRoutes } from './routes/bulk';
import { registerCampaignRoutes } from './routes/campaigns';
import { registerConfigRoutes } from './routes/config';
import { registerContactRoutes } from './routes/contacts';
import { registerDomainRoutes } from './routes/domains';
import { registerEmailRoutes } from './routes/emails';
import { registerEventRoutes } from './routes/events';
import { registerExecutionRoutes } from './routes/executions';
import { registerFeedRoutes } from './routes/feed';
import { registerFieldRoutes } from './routes/fields';
import { registerImportRoutes } from './routes/imports';
import { registerJourneyRoutes } from './routes/journeys';
import { registerLandingRoutes } from './routes/landing';
import { registerMemberRoutes } from './routes/members';
import { registerMetaRoutes } from './routes/meta';
import { registerNotifyRoutes } from './routes/notify';
import { registerOutboxRoutes } from './routes/outbox';
import { registerProjectRoutes } from './routes/projects';
import { registerPublicRoutes } from './routes/public';
import { registerSegmentRoutes } from './routes/segments';
import { registerSubscriptionRoutes } from './routes/subscriptions';
import { registerTemplateRoutes } from './routes/templates';
import { registerTrackingRoutes } from './routes/tracking';
import { registerUserRoutes } from './routes/users';
import { registerUploadRoutes } from './routes/uploads';
import { registerVerifyRoutes } from './routes/verify';
import { registerWebAppRoutes } from './routes/web-app';
import { RouteRegistry } from './routing';

const VERSION = '0.1.0';

export interface App {
  app: Express;
  registry: RouteRegistry;
}

/** Composition root of the HTTP API: middleware order, then one registration per resource. */
export function createApp(deps: AppDeps): App {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', deps.config.trustProxy);
  app.use(requestLog(deps.logger));

  const registry = new RouteRegistry(express.Router(), {
    scope: requestScope(deps.orm),
    authenticate: authenticate(deps.sessionSecret, deps.keys),
    rateLimit: rateLimit(deps.rateLimiter),
  });
  // Field routes first: `/contacts/fields` must not be taken for a contact id.
  registerFieldRoutes(registry, deps);
  // `/contacts/bulk-*` and `/contacts/bulk/:jobId` before `/contacts/:id`.
  registerBulkRoutes(registry, deps);
  // `/contacts/import` and `/contacts/import/:jobId` before `/contacts/:id`.
  registerImportRoutes(registry, deps);
  registerContactRoutes(registry, deps);
  registerPublicRoutes(registry, deps);
  registerVerifyRoutes(registry, deps);
  registerEventRoutes(registry, deps);
  registerFeedRoutes(registry, deps);
  registerAnalyticsRoutes(registry, deps);
  registerDomainRoutes(registry, deps);
  registerEmailRoutes(registry, deps);
  registerTemplateRoutes(registry, deps);
  registerSegmentRoutes(registry, deps);
  registerCampaignRoutes(registry, deps);
  // `/workflows/fields` is registered inside, before `/workflows/:id`.
  registerJourneyRoutes(registry, deps);
  registerExecutionRoutes(registry, deps);
  registerSubscriptionRoutes(registry, deps);
  registerTrackingRoutes(registry, deps);
  registerNotifyRoutes(registry, deps);
  registerUploadRoutes(registry, deps);
  registerAuthRoutes(registry, deps);
  registerOAuthRoutes(registry, deps);
  registerUserRoutes(registry, deps);
  registerProjectRoutes(registry, deps);
  registerMemberRoutes(registry, deps);
  registerBillingRoutes(registry, deps);
  registerConfigRoutes(registry, deps);
  registerOutboxRoutes(registry, deps);
  registerLandingRoutes(registry, deps);
  registerWebAppRoutes(registry);
  registerMetaRoutes(registry, deps, VERSION);

  app.use(registry.router);
  app.use(notFoundHandler);
  app.use(errorHandler);
  return { app, registry };
}
