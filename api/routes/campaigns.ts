import { z } from 'zod';
import {
  campaignStats,
  countAudience,
  deleteCampaign,
  duplicateCampaign,
  getCampaign,
  listCampaigns,
} from '../../db/campaigns/campaigns';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { ERROR_TEXT } from '../openapi';
import { cursorPage, idParams } from '../schemas/common';
import {
  audienceQuery,
  audienceResponse,
  campaignListQuery,
  campaignSchema,
  campaignStatsSchema,
  createCampaignBody,
  replaceCampaignBody,
  sendCampaignBody,
  testCampaignBody,
  testSendResponse,
} from '../schemas/campaigns';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { cancelCampaign, draftCampaign, editCampaign, sendCampaign, sendCampaignTest } from '../use-cases/campaigns';

/** Campaigns; what their workflow takes part in is in use-cases/campaigns.ts. */
export function registerCampaignRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/campaigns',
    tag: 'Campaigns',
    summary: 'List campaigns, newest first (cursor pagination), each with its stats',
    auth: 'secret',
    query: campaignListQuery,
    response: cursorPage(campaignSchema),
    handler: ({ scope, project, query }) => listCampaigns(scope.em, project.id, query),
  });

  api.add({
    method: 'post',
    path: '/campaigns',
    tag: 'Campaigns',
    summary: 'Create a campaign in DRAFT (`from` must be on a verified domain; segmentId null = all subscribed contacts)',
    description: `A campaign is one message to an audience: the subscribed members of \`segmentId\`, or every
subscribed contact when it is null. Its subject and body are Handlebars, rendered per recipient and
compiled now (a syntax error is a 422). It starts as a DRAFT: nothing is sent until
\`POST /campaigns/{id}/send\`; \`POST /campaigns/{id}/test\` sends a single copy to check it first.

Lifecycle: DRAFT → SENDING (sent now) or SCHEDULED (\`scheduledFor\`) → SENDING → SENT; a SCHEDULED or
SENDING campaign can be CANCELLED. Only DRAFT and SCHEDULED campaigns can be edited.`,
    errors: { 403: ERROR_TEXT.domainNotVerified },
    auth: 'secret',
    body: createCampaignBody,
    response: campaignSchema,
    status: 201,
    handler: ({ scope, project, body }) => draftCampaign(deps, scope.em, project.id, body),
  });

  // Before /campaigns/:id, which would otherwise take "audience" for an id.
  api.add({
    method: 'get',
    path: '/campaigns/audience',
    tag: 'Campaigns',
    summary: 'Count the recipients an audience (a segment, or every subscribed contact) would have if a campaign were sent now',
    description: `The count \`POST /campaigns/{id}/send\` makes before sending, for a campaign being composed: the
subscribed members of \`segmentId\` (a TRANSACTIONAL campaign to a segment also reaches its unsubscribed
members), or every subscribed contact when no segment is given. The audience is frozen only when sending starts.`,
    errors: { 404: '`SEGMENT_NOT_FOUND`: no such segment in the project' },
    auth: 'secret',
    query: audienceQuery,
    response: audienceResponse,
    handler: async ({ scope, project, query }) => {
      const audience = { segmentId: query.segmentId ?? null, type: query.type };
      return { ...audience, recipients: await countAudience(scope.em, project.id, audience) };
    },
  });

  api.add({
    method: 'get',
    path: '/campaigns/:id',
    tag: 'Campaigns',
    summary: 'Get a campaign with its stats',
    auth: 'secret',
    params: idParams,
    response: campaignSchema,
    handler: ({ scope, project, params }) => getCampaign(scope.em, project.id, params.id),
  });

  api.add({
    method: 'put',
    path: '/campaigns/:id',
    tag: 'Campaigns',
    summary: 'Replace a DRAFT or SCHEDULED campaign (409 otherwise); `scheduledFor` moves a SCHEDULED one',
    errors: {
      403: ERROR_TEXT.domainNotVerified,
      409: '`CAMPAIGN_NOT_EDITABLE`: the campaign is SENDING, SENT or CANCELLED',
      503: TEMPORAL_UNAVAILABLE_TEXT,
    },
    auth: 'secret',
    params: idParams,
    body: replaceCampaignBody,
    response: campaignSchema,
    handler: ({ scope, project, params, body }) => editCampaign(deps, scope.em, project.id, params.id, body),
  });

  api.add({
    method: 'delete',
    path: '/campaigns/:id',
    tag: 'Campaigns',
    summary: 'Delete a campaign (409 while it is SCHEDULED or SENDING: cancel it first)',
    errors: { 409: '`CAMPAIGN_ACTIVE`: the campaign is SCHEDULED or SENDING; cancel it first' },
    auth: 'secret',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteCampaign(scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });

  api.add({
    method: 'post',
    path: '/campaigns/:id/duplicate',
    tag: 'Campaigns',
    summary: 'Copy a campaign (any state) into a new DRAFT; the original is unchanged',
    auth: 'secret',
    params: idParams,
    response: campaignSchema,
    status: 201,
    handler: ({ scope, project, params }) => duplicateCampaign(scope.em, project.id, params.id),
  });

  api.add({
    method: 'post',
    path: '/campaigns/:id/send',
    tag: 'Campaigns',
    summary: 'Send a DRAFT now (→ SENDING) or at a future `scheduledFor` (→ SCHEDULED); 422 with no recipients or a past time',
    description: `Counts the audience now (422 when it is empty) and checks it against the monthly campaign cap
(402 when the audience is larger than what is left). Then a durable workflow waits until \`scheduledFor\`
if given, freezes the audience, and sends in batches at the project's throttle; the campaign is SENT
when every recipient has been handled. Follow it with \`GET /campaigns/{id}\` or \`/stats\`.`,
    errors: {
      402: ERROR_TEXT.billingLimit,
      403: ERROR_TEXT.domainNotVerified,
      409: '`CAMPAIGN_NOT_DRAFT`: only a DRAFT can be sent (move a SCHEDULED one with `PUT`, or duplicate a sent one)',
      503: TEMPORAL_UNAVAILABLE_TEXT,
    },
    auth: 'secret',
    params: idParams,
    body: sendCampaignBody,
    response: campaignSchema,
    handler: ({ scope, project, params, body }) => sendCampaign(deps, scope.em, project.id, params.id, body.scheduledFor),
  });

  api.add({
    method: 'post',
    path: '/campaigns/:id/cancel',
    tag: 'Campaigns',
    summary: 'Cancel a SCHEDULED or SENDING campaign (→ CANCELLED; a running send stops within about a tenth of a second)',
    errors: { 409: '`CAMPAIGN_NOT_CANCELLABLE`: only SCHEDULED or SENDING campaigns can be cancelled', 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    params: idParams,
    response: campaignSchema,
    handler: ({ scope, project, params }) => cancelCampaign(deps, scope.em, project.id, params.id),
  });

  api.add({
    method: 'post',
    path: '/campaigns/:id/test',
    tag: 'Campaigns',
    summary: 'Send one rendered copy to an address; the campaign, its recipients and stats do not change',
    description: 'Rendered with the contact of that address when there is one (else with placeholder contact values). The copy counts toward the monthly campaign cap.',
    errors: { 402: ERROR_TEXT.billingLimit, 403: ERROR_TEXT.domainNotVerified },
    auth: 'secret',
    params: idParams,
    body: testCampaignBody,
    response: testSendResponse,
    status: 202,
    handler: ({ scope, project, params, body }) => sendCampaignTest(deps, scope.em, project.id, params.id, body.email),
  });

  api.add({
    method: 'get',
    path: '/campaigns/:id/stats',
    tag: 'Campaigns',
    summary: 'Send, delivery, open, click, bounce, complaint and unsubscribe counts, and rates over emails sent',
    auth: 'secret',
    params: idParams,
    response: campaignStatsSchema,
    handler: ({ scope, project, params }) => campaignStats(scope.em, project.id, params.id),
  });
}
