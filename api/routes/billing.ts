import type { Request } from 'express';
import { InvalidWebhookSignature, type PaymentProvider } from '../../billing/provider';
import { applyBillingEvent, listProjectInvoices, openBillingPortal, startCheckout } from '../../db/billing/accounts';
import { getBillingLimits, getConsumption, monthContaining, parseMonth, setBillingLimits } from '../../db/billing/allowance';
import { AppError } from '../../errors';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import {
  billingLimitsBody,
  billingLimitsSchema,
  checkoutBody,
  consumptionQuery,
  consumptionSchema,
  invoicesSchema,
  portalBody,
  sessionUrlSchema,
  webhookAck,
} from '../schemas/billing';
import { idParams } from '../schemas/common';

const BASE = '/users/@me/projects/:id';
const WEBHOOK_BODY_LIMIT = 1024 * 1024;

const billingDisabled = () =>
  new AppError(404, 'BILLING_DISABLED', 'Billing is not enabled on this server', {
    suggestion:
      'Set STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET and STRIPE_PRICE_ID to enable it. Monthly caps ' +
      '(…/billing-limits) and consumption (…/billing-consumption) work without it.',
  });

/** The exact bytes received: the signature is over them, so no JSON parser may run first. */
async function rawBody(req: Request): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > WEBHOOK_BODY_LIMIT) {
      throw new AppError(413, 'PAYLOAD_TOO_LARGE', 'The webhook body is larger than 1 MB', {
        suggestion: 'Billing provider events are small; check what is posting to this endpoint.',
      });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Monthly consumption and caps (always on: self-hosted servers cap too), and the payment provider's
 * checkout, portal, invoices and webhook (404 BILLING_DISABLED unless STRIPE_* is configured).
 * A member's session or the project's own secret key (counts as ADMIN).
 */
export function registerBillingRoutes(api: RouteRegistry, deps: AppDeps): void {
  const payments = (): PaymentProvider => {
    if (!deps.payments) throw billingDisabled();
    return deps.payments;
  };

  api.add({
    method: 'get',
    path: `${BASE}/billing-consumption`,
    tag: 'Billing',
    summary: 'Emails counted per category (transactional, campaign, workflow) in a calendar month (UTC), with the caps',
    auth: 'secret',
    projectParam: 'id',
    params: idParams,
    query: consumptionQuery,
    response: consumptionSchema,
    handler: ({ scope, params, query }) =>
      getConsumption(scope.em, params.id, query.month ? parseMonth(query.month) : monthContaining(new Date())),
  });

  api.add({
    method: 'get',
    path: `${BASE}/billing-limits`,
    tag: 'Billing',
    summary: 'Monthly caps per category (null: no cap)',
    auth: 'secret',
    projectParam: 'id',
    params: idParams,
    response: billingLimitsSchema,
    handler: ({ scope, params }) => getBillingLimits(scope.em, params.id),
  });

  api.add({
    method: 'put',
    path: `${BASE}/billing-limits`,
    tag: 'Billing',
    summary: 'Set monthly caps (a number caps, null removes; omitted categories keep theirs); over a cap sends get 402 BILLING_LIMIT_EXCEEDED',
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: idParams,
    body: billingLimitsBody,
    response: billingLimitsSchema,
    handler: ({ scope, params, body }) => setBillingLimits(scope.em, params.id, body),
  });

  api.add({
    method: 'post',
    path: `${BASE}/checkout`,
    tag: 'Billing',
    summary: "A payment provider's checkout page for the project's subscription (409 when it already has one)",
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: idParams,
    body: checkoutBody,
    response: sessionUrlSchema,
    handler: ({ scope, project, user, body }) =>
      startCheckout(scope.em, payments(), project, user?.email, {
        successUrl: body.successUrl ?? `${deps.config.publicUrl}/?billing=success&project=${project.id}`,
        cancelUrl: body.cancelUrl ?? `${deps.config.publicUrl}/?billing=cancelled&project=${project.id}`,
      }),
  });

  api.add({
    method: 'post',
    path: `${BASE}/billing-portal`,
    tag: 'Billing',
    summary: "The payment provider's customer portal (409 NO_BILLING_ACCOUNT before the first checkout)",
    auth: 'secret',
    projectParam: 'id',
    role: 'ADMIN',
    params: idParams,
    body: portalBody,
    response: sessionUrlSchema,
    handler: ({ scope, params, body }) => openBillingPortal(scope.em, payments(), params.id, body.returnUrl ?? deps.config.publicUrl),
  });

  api.add({
    method: 'get',
    path: `${BASE}/billing-invoices`,
    tag: 'Billing',
    summary: "The project's invoices from the payment provider, newest first (empty before the first checkout)",
    auth: 'secret',
    projectParam: 'id',
    params: idParams,
    response: invoicesSchema,
    handler: async ({ scope, params }) => ({ data: await listProjectInvoices(scope.em, payments(), params.id) }),
  });

  api.add({
    method: 'post',
    path: '/webhooks/incoming/billing',
    tag: 'Webhooks',
    summary:
      'Payment provider events (Stripe: checkout.session.completed, customer.subscription.*), verified by the ' +
      'Stripe-Signature header (400 INVALID_SIGNATURE otherwise); other event types are acknowledged and ignored',
    auth: 'none',
    response: webhookAck,
    handler: async ({ scope, req }) => {
      const provider = payments();
      let event;
      try {
        event = provider.parseWebhook(await rawBody(req), req.get('stripe-signature'));
      } catch (err) {
        if (!(err instanceof InvalidWebhookSignature)) throw err;
        throw new AppError(400, 'INVALID_SIGNATURE', `The webhook signature is not valid: ${err.message}`, {
          suggestion: 'Set STRIPE_WEBHOOK_SECRET to the signing secret of this endpoint in the Stripe dashboard.',
        });
      }
      const applied = await applyBillingEvent(scope.em, provider.name, event);
      req.log.info({ event: event.id, type: event.type, applied }, 'billing webhook');
      return { received: true as const, applied };
    },
  });
}
