/**
 * What the service needs from a payment provider, in its own terms: the routes and db/billing/allowance.ts
 * never see a provider's types. billing/stripe.ts is the one implementation.
 */
export interface PaymentProvider {
  /** Stored in billing_accounts.provider. */
  readonly name: string;
  /**
   * A hosted page where the project subscribes to the plan. With `customer` the subscription goes
   * to the project's existing customer; without, the provider creates one and the
   * `checkout.completed` event links it to the project.
   */
  createCheckoutSession(
    project: { id: string; name: string },
    customer: { id: string } | { email: string } | undefined,
    successUrl: string,
    cancelUrl: string,
  ): Promise<{ url: string }>;
  /** A hosted page where the customer manages payment methods and the subscription. */
  createPortalSession(customerId: string, returnUrl: string): Promise<{ url: string }>;
  /** The customer's invoices, newest first (up to 100). */
  listInvoices(customerId: string): Promise<Invoice[]>;
  /** Verifies the signature over the exact bytes received; throws InvalidWebhookSignature when it does not hold. */
  parseWebhook(rawBody: Buffer, signatureHeader: string | undefined): BillingEvent;
}

export interface Invoice {
  id: string;
  number: string | null;
  status: string | null;
  /** In the currency's smallest unit (cents). */
  amountDue: number;
  amountPaid: number;
  currency: string;
  /** ISO 8601. */
  created: string;
  hostedInvoiceUrl: string | null;
  pdf: string | null;
}

/** A provider notification, reduced to what changes a project's billing account. */
export type BillingEvent =
  | {
      type: 'checkout.completed';
      id: string;
      /** When the provider created the event: older news never overwrites newer. */
      createdAt: Date;
      projectId: string;
      customerId: string;
      subscriptionId: string | null;
    }
  | {
      type: 'subscription.changed';
      id: string;
      createdAt: Date;
      /** Set when the subscription came from our checkout: it can arrive before `checkout.completed`. */
      projectId: string | null;
      customerId: string;
      subscriptionId: string;
      status: string;
    }
  | { type: 'ignored'; id: string; providerType: string };

export class InvalidWebhookSignature extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidWebhookSignature';
  }
}
