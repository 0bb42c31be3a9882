import Stripe from 'stripe';
import type { Config } from '../config';
import { type BillingEvent, type Invoice, InvalidWebhookSignature, type PaymentProvider } from './provider';

type StripeConfig = NonNullable<Config['stripe']>;

/** `STRIPE_API_URL` (e.g. a stripe-mock on loopback) as the client's host / port / protocol. */
function endpoint(apiUrl: string | undefined): { host?: string; port?: number; protocol?: 'http' | 'https' } {
  if (!apiUrl) return {};
  const url = new URL(apiUrl);
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  return { host: url.hostname, port: url.port ? Number(url.port) : protocol === 'http' ? 80 : 443, protocol };
}

const idOf = (ref: string | { id: string } | null): string | null => (ref === null ? null : typeof ref === 'string' ? ref : ref.id);

/**
 * The Stripe implementation: a subscription Checkout to one price (STRIPE_PRICE_ID), the hosted
 * customer portal, the customer's invoices, and signed webhooks. The project id travels as the
 * Checkout session's `client_reference_id` and comes back in `checkout.session.completed`.
 */
export function createStripeProvider(config: StripeConfig): PaymentProvider {
  const stripe = new Stripe(config.secretKey, { ...endpoint(config.apiUrl), telemetry: false, maxNetworkRetries: 2 });

  return {
    name: 'stripe',

    async createCheckoutSession(project, customer, successUrl, cancelUrl) {
      const session = await stripe.checkout.sessions.create({
        mode: 'subscription',
        line_items: [{ price: config.priceId, quantity: 1 }],
        client_reference_id: project.id,
        metadata: { projectId: project.id, projectName: project.name },
        subscription_data: { metadata: { projectId: project.id } },
        ...(customer && 'id' in customer ? { customer: customer.id } : {}),
        ...(customer && 'email' in customer ? { customer_email: customer.email } : {}),
        success_url: successUrl,
        cancel_url: cancelUrl,
      });
      if (!session.url) throw new Error(`Stripe returned checkout session ${session.id} without a url`);
      return { url: session.url };
    },

    async createPortalSession(customerId, returnUrl) {
      const session = await stripe.billingPortal.sessions.create({ customer: customerId, return_url: returnUrl });
      return { url: session.url };
    },

    async listInvoices(customerId) {
      const page = await stripe.invoices.list({ customer: customerId, limit: 100 });
      return page.data.map(
        (i): Invoice => ({
          id: i.id,
          number: i.number,
          status: i.status,
          amountDue: i.amount_due,
          amountPaid: i.amount_paid,
          currency: i.currency,
          created: new Date(i.created * 1000).toISOString(),
          hostedInvoiceUrl: i.hosted_invoice_url ?? null,
          pdf: i.invoice_pdf ?? null,
        }),
      );
    },

    parseWebhook(rawBody, signatureHeader) {
      if (!signatureHeader) throw new InvalidWebhookSignature('The Stripe-Signature header is missing');
      let event: Stripe.Event;
      try {
        event = stripe.webhooks.constructEvent(rawBody, signatureHeader, config.webhookSecret);
      } catch (err) {
        throw new InvalidWebhookSignature(err instanceof Error ? err.message : String(err));
      }
      return toBillingEvent(event);
    },
  };
}

function toBillingEvent(event: Stripe.Event): BillingEvent {
  const createdAt = new Date(event.created * 1000);
  switch (event.type) {
    case 'checkout.session.completed': {
      const session = event.data.object;
      const customerId = idOf(session.customer);
      // A session we did not create (no project reference) or without a customer changes nothing here.
      if (!session.client_reference_id || !customerId) break;
      return {
        type: 'checkout.completed',
        id: event.id,
        createdAt,
        projectId: session.client_reference_id,
        customerId,
        subscriptionId: idOf(session.subscription),
      };
    }
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted': {
      const subscription = event.data.object;
      return {
        type: 'subscription.changed',
        id: event.id,
        createdAt,
        projectId: subscription.metadata.projectId ?? null,
        customerId: idOf(subscription.customer)!,
        subscriptionId: subscription.id,
        status: subscription.status,
      };
    }
  }
  return { type: 'ignored', id: event.id, providerType: event.type };
}
