import type { EntityManager } from '@mikro-orm/postgresql';
import type { BillingEvent, Invoice, PaymentProvider } from '../../billing/provider';
import { AppError } from '../../errors';
import { queryOne } from '../sql';

/** Subscription statuses that still bill: a project in one of them is not sent to checkout again. */
const LIVE_STATUSES = ['active', 'trialing', 'past_due', 'unpaid', 'paused'];
/** Statuses after which a subscription never comes back. */
const ENDED_STATUSES = ['canceled', 'incomplete_expired'];

interface AccountRow {
  customer_id: string;
  subscription_status: string | null;
}

const account = (em: EntityManager, projectId: string) =>
  queryOne<AccountRow>(em, 'select customer_id, subscription_status from billing_accounts where project_id = ?', [projectId]);

/** A provider that refuses or does not answer is a 502 with its reason, not a 500. */
async function fromProvider<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    throw new AppError(502, 'PAYMENT_PROVIDER_ERROR', `The payment provider failed: ${err instanceof Error ? err.message : String(err)}`, {
      suggestion: 'Try again in a moment; if it persists, check the STRIPE_* settings of this server.',
    });
  }
}

/**
 * POST …/checkout: a hosted checkout for the project's subscription. A project with a customer
 * already checks out as that customer; a new one is created with the caller's email.
 */
export async function startCheckout(
  em: EntityManager,
  payments: PaymentProvider,
  project: { id: string; name: string },
  callerEmail: string | undefined,
  urls: { successUrl: string; cancelUrl: string },
): Promise<{ url: string }> {
  const existing = await account(em, project.id);
  if (existing?.subscription_status && LIVE_STATUSES.includes(existing.subscription_status)) {
    throw new AppError(409, 'ALREADY_SUBSCRIBED', `The project already has a subscription (${existing.subscription_status})`, {
      suggestion: 'Change or cancel it in the billing portal: POST /users/@me/projects/:id/billing-portal.',
    });
  }
  // A secret key has no email: the payer enters theirs on the checkout page.
  const customer = existing ? { id: existing.customer_id } : callerEmail ? { email: callerEmail } : undefined;
  return fromProvider(payments.createCheckoutSession(project, customer, urls.successUrl, urls.cancelUrl));
}

/** POST …/billing-portal: 409 until a checkout has given the project a customer. */
export async function openBillingPortal(em: EntityManager, payments: PaymentProvider, projectId: string, returnUrl: string): Promise<{ url: string }> {
  const existing = await account(em, projectId);
  if (!existing) {
    throw new AppError(409, 'NO_BILLING_ACCOUNT', 'The project has no billing account yet', {
      suggestion: 'Subscribe first with POST /users/@me/projects/:id/checkout; the portal opens once the checkout completes.',
    });
  }
  return fromProvider(payments.createPortalSession(existing.customer_id, returnUrl));
}

/** GET …/billing-invoices: the customer's invoices; none before the first checkout. */
export async function listProjectInvoices(em: EntityManager, payments: PaymentProvider, projectId: string): Promise<Invoice[]> {
  const existing = await account(em, projectId);
  return existing ? fromProvider(payments.listInvoices(existing.customer_id)) : [];
}

/**
 * A verified webhook event applied to billing_accounts; returns whether it changed anything.
 * Checkout links the customer (and subscription) to the project named by the session. A
 * subscription event sets the status unless an event the provider made later set it already, and
 * never lets an ended subscription overwrite a different, newer one. A customer already linked to
 * another project is left alone (customer_id is unique).
 */
export async function applyBillingEvent(em: EntityManager, provider: string, event: BillingEvent): Promise<boolean> {
  if (event.type === 'ignored') return false;
  if (event.type === 'checkout.completed') {
    const row = await queryOne(
      em,
      `insert into billing_accounts (project_id, provider, customer_id, subscription_id)
       select p.id, ?, ?, ? from projects p
       where p.id = ? and not exists (select 1 from billing_accounts b where b.customer_id = ? and b.project_id <> p.id)
       on conflict (project_id) do update set provider = excluded.provider, customer_id = excluded.customer_id,
         subscription_id = coalesce(excluded.subscription_id, billing_accounts.subscription_id), updated_at = now()
       returning project_id`,
      [provider, event.customerId, event.subscriptionId, event.projectId, event.customerId],
    );
    return row !== undefined;
  }
  const applies = `(billing_accounts.subscription_id is null
      or (billing_accounts.subscription_id = excluded.subscription_id
          and (billing_accounts.subscription_status_at is null or billing_accounts.subscription_status_at <= excluded.subscription_status_at))
      or (billing_accounts.subscription_id <> excluded.subscription_id and excluded.subscription_status <> all(?::text[])))`;
  const values = [provider, event.customerId, event.subscriptionId, event.status, event.createdAt];
  // With the project known the row is created if checkout.completed has not arrived yet.
  const row = event.projectId
    ? await queryOne(
        em,
        `insert into billing_accounts (project_id, provider, customer_id, subscription_id, subscription_status, subscription_status_at)
         select p.id, ?, ?, ?, ?, ? from projects p
         where p.id = ? and not exists (select 1 from billing_accounts b where b.customer_id = ? and b.project_id <> p.id)
         on conflict (project_id) do update set customer_id = excluded.customer_id, subscription_id = excluded.subscription_id,
           subscription_status = excluded.subscription_status, subscription_status_at = excluded.subscription_status_at, updated_at = now()
         where billing_accounts.customer_id = excluded.customer_id and ${applies}
         returning project_id`,
        [...values, event.projectId, event.customerId, ENDED_STATUSES],
      )
    : await queryOne(
        em,
        `update billing_accounts set subscription_id = excluded.subscription_id, subscription_status = excluded.subscription_status,
           subscription_status_at = excluded.subscription_status_at, updated_at = now()
         from (select ?::text as provider, ?::text as customer_id, ?::text as subscription_id, ?::text as subscription_status,
                 ?::timestamptz as subscription_status_at) excluded
         where billing_accounts.customer_id = excluded.customer_id and ${applies}
         returning project_id`,
        [...values, ENDED_STATUSES],
      );
  return row !== undefined;
}
