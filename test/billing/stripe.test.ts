import Stripe from 'stripe';
import { createStripeProvider } from '../../billing/stripe';
import { queryOne } from '../../db/sql';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { startStripeMock, type StripeMock } from '../helpers/stripe-mock';
import { freePort } from '../../cli/temporal-server';

/**
 * The payment provider over the real `stripe` client: checkout, portal and invoices against
 * stripe-mock (Stripe's own API mock) on loopback, and webhooks signed with the package's own
 * helper. A second environment without STRIPE_* shows billing off.
 */
const WEBHOOK_SECRET = 'whsec_test_secret_for_tidings';
const stripeSettings = (apiUrl: string) => ({
  STRIPE_SECRET_KEY: 'sk_test_tidings',
  STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  STRIPE_PRICE_ID: 'price_tidings_monthly',
  STRIPE_API_URL: apiUrl,
});

let mock: StripeMock;
let env: TestEnv;
let off: TestEnv;
const signer = new Stripe('sk_test_signer');

beforeAll(async () => {
  mock = await startStripeMock();
  env = await startTestEnv(stripeSettings(mock.url));
  off = await startTestEnv();
});

afterAll(async () => {
  await env?.close();
  await off?.close();
  await mock?.close();
});

interface Member {
  owner: TestUser;
  member: TestUser;
  projectId: string;
}

async function projectWithMembers(e: TestEnv): Promise<Member> {
  const project = await e.project('billing');
  const owner = await createTestUser(e);
  const member = await createTestUser(e);
  await addTestMember(e, project.id, owner.id, 'OWNER');
  await addTestMember(e, project.id, member.id, 'MEMBER');
  return { owner, member, projectId: project.id };
}

const base = (projectId: string) => `/users/@me/projects/${projectId}`;

let eventSeq = 0;
/** A Stripe event as Stripe posts it, with a valid Stripe-Signature made by the package's helper. */
function stripeEvent(type: string, object: Record<string, unknown>, createdSeconds = Math.floor(Date.now() / 1000)) {
  const payload = JSON.stringify({
    id: `evt_test_${++eventSeq}_${Date.now()}`,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: createdSeconds,
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  });
  return { payload, signature: signer.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }) };
}

const postWebhook = (e: TestEnv, payload: string, signature?: string) => {
  const req = e.http().post('/webhooks/incoming/billing').set('Content-Type', 'application/json');
  return (signature === undefined ? req : req.set('Stripe-Signature', signature)).send(payload);
};

const accountOf = (projectId: string) =>
  queryOne<{ provider: string; customer_id: string; subscription_id: string | null; subscription_status: string | null }>(
    env.orm.em.fork(),
    'select provider, customer_id, subscription_id, subscription_status from billing_accounts where project_id = ?',
    [projectId],
  );

const checkoutCompleted = (projectId: string, customer: string, subscription: string) =>
  stripeEvent('checkout.session.completed', {
    id: `cs_test_${customer}`,
    object: 'checkout.session',
    client_reference_id: projectId,
    customer,
    subscription,
    mode: 'subscription',
    status: 'complete',
  });

const subscriptionEvent = (type: string, id: string, customer: string, status: string, created?: number, projectId?: string) =>
  stripeEvent(
    type,
    { id, object: 'subscription', customer, status, metadata: projectId ? { projectId } : {} },
    created,
  );

describe('Stripe client against stripe-mock', () => {
  test('the provider itself: checkout session, portal session and invoices through the real client', async () => {
    const provider = createStripeProvider({ secretKey: 'sk_test_tidings', webhookSecret: WEBHOOK_SECRET, priceId: 'price_x', apiUrl: mock.url });
    const checkout = await provider.createCheckoutSession({ id: 'prj_direct', name: 'Direct' }, { email: 'a@example.com' }, 'https://app.example/ok', 'https://app.example/no');
    expect(checkout.url).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const portal = await provider.createPortalSession('cus_direct', 'https://app.example/back');
    expect(portal.url).toMatch(/^https:\/\//);
    const invoices = await provider.listInvoices('cus_direct');
    expect(invoices.length).toBeGreaterThan(0);
    for (const i of invoices) {
      expect(i.id).toMatch(/^in_/);
      expect(typeof i.amountDue).toBe('number');
      expect(typeof i.amountPaid).toBe('number');
      expect(i.currency).toMatch(/^[a-z]{3}$/);
      expect(Number.isNaN(Date.parse(i.created))).toBe(false);
    }
  });

  test('POST …/checkout: ADMIN gets the provider URL; MEMBER 403; bad URL 422', async () => {
    const { owner, member, projectId } = await projectWithMembers(env);
    const ok = await env.http().post(`${base(projectId)}/checkout`).set('Cookie', owner.cookie).send({});
    expect(ok.status).toBe(200);
    expect(ok.body.url).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const custom = await env
      .http()
      .post(`${base(projectId)}/checkout`)
      .set('Cookie', owner.cookie)
      .send({ successUrl: 'https://dash.example/ok', cancelUrl: 'https://dash.example/no' });
    expect(custom.status).toBe(200);

    const forbidden = await env.http().post(`${base(projectId)}/checkout`).set('Cookie', member.cookie).send({});
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe('FORBIDDEN');
    const invalid = await env.http().post(`${base(projectId)}/checkout`).set('Cookie', owner.cookie).send({ successUrl: 'javascript:alert(1)' });
    expect(invalid.status).toBe(422);
    expect(invalid.body.error.errors[0].field).toBe('successUrl');
  });

  test('portal 409 and no invoices before a customer; after checkout.session.completed both come from Stripe', async () => {
    const { owner, member, projectId } = await projectWithMembers(env);
    const before = await env.http().post(`${base(projectId)}/billing-portal`).set('Cookie', owner.cookie).send({});
    expect(before.status).toBe(409);
    expect(before.body.error.code).toBe('NO_BILLING_ACCOUNT');
    const none = await env.http().get(`${base(projectId)}/billing-invoices`).set('Cookie', member.cookie);
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ data: [] });

    const { payload, signature } = checkoutCompleted(projectId, `cus_${projectId}`, `sub_${projectId}`);
    expect((await postWebhook(env, payload, signature)).body).toEqual({ received: true, applied: true });

    const portal = await env.http().post(`${base(projectId)}/billing-portal`).set('Cookie', owner.cookie).send({ returnUrl: 'https://dash.example/billing' });
    expect(portal.status).toBe(200);
    expect(portal.body.url).toMatch(/^https:\/\//);
    const memberPortal = await env.http().post(`${base(projectId)}/billing-portal`).set('Cookie', member.cookie).send({});
    expect(memberPortal.status).toBe(403);

    const invoices = await env.http().get(`${base(projectId)}/billing-invoices`).set('Cookie', member.cookie);
    expect(invoices.status).toBe(200);
    expect(invoices.body.data.length).toBeGreaterThan(0);
    expect(Object.keys(invoices.body.data[0]).sort()).toEqual(
      ['amountDue', 'amountPaid', 'created', 'currency', 'hostedInvoiceUrl', 'id', 'number', 'pdf', 'status'].sort(),
    );
  });

  test('a provider that does not answer is a 502 PAYMENT_PROVIDER_ERROR', async () => {
    const down = await startTestEnv(stripeSettings(`http://127.0.0.1:${await freePort()}`));
    try {
      const { owner, projectId } = await projectWithMembers(down);
      const res = await down.http().post(`${base(projectId)}/checkout`).set('Cookie', owner.cookie).send({});
      expect(res.status).toBe(502);
      expect(res.body.error.code).toBe('PAYMENT_PROVIDER_ERROR');
    } finally {
      await down.close();
    }
  });
});

describe('webhook', () => {
  test('good signatures: checkout links customer and subscription; subscription events set the status', async () => {
    const { owner, projectId } = await projectWithMembers(env);
    const customer = `cus_w_${projectId}`;
    const sub = `sub_w_${projectId}`;
    const t0 = Math.floor(Date.now() / 1000);

    const done = checkoutCompleted(projectId, customer, sub);
    const res = await postWebhook(env, done.payload, done.signature);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true, applied: true });
    expect(await accountOf(projectId)).toEqual({ provider: 'stripe', customer_id: customer, subscription_id: sub, subscription_status: null });

    const active = subscriptionEvent('customer.subscription.updated', sub, customer, 'active', t0 + 1);
    expect((await postWebhook(env, active.payload, active.signature)).body.applied).toBe(true);
    expect((await accountOf(projectId))?.subscription_status).toBe('active');
    // Subscribed: checkout again is refused, the portal is the way.
    const again = await env.http().post(`${base(projectId)}/checkout`).set('Cookie', owner.cookie).send({});
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('ALREADY_SUBSCRIBED');

    const deleted = subscriptionEvent('customer.subscription.deleted', sub, customer, 'canceled', t0 + 3);
    expect((await postWebhook(env, deleted.payload, deleted.signature)).body.applied).toBe(true);
    // An older event delivered late changes nothing.
    const stale = subscriptionEvent('customer.subscription.updated', sub, customer, 'active', t0 + 2);
    expect((await postWebhook(env, stale.payload, stale.signature)).body.applied).toBe(false);
    expect((await accountOf(projectId))?.subscription_status).toBe('canceled');

    // After cancelling, checkout is open again and goes to the same customer.
    expect((await env.http().post(`${base(projectId)}/checkout`).set('Cookie', owner.cookie).send({})).status).toBe(200);
  });

  test('a subscription event before checkout.session.completed creates the account from its metadata', async () => {
    const { projectId } = await projectWithMembers(env);
    const customer = `cus_early_${projectId}`;
    const created = subscriptionEvent('customer.subscription.created', `sub_early_${projectId}`, customer, 'active', undefined, projectId);
    expect((await postWebhook(env, created.payload, created.signature)).body.applied).toBe(true);
    const done = checkoutCompleted(projectId, customer, `sub_early_${projectId}`);
    expect((await postWebhook(env, done.payload, done.signature)).body.applied).toBe(true);
    expect(await accountOf(projectId)).toMatchObject({ customer_id: customer, subscription_status: 'active' });
  });

  test('bad, missing or foreign signatures → 400 INVALID_SIGNATURE and nothing changes; unknown types are acknowledged', async () => {
    const { projectId } = await projectWithMembers(env);
    const { payload, signature } = checkoutCompleted(projectId, `cus_bad_${projectId}`, `sub_bad_${projectId}`);

    const tampered = payload.replace(`cus_bad_${projectId}`, `cus_evil_${projectId}`);
    const wrongSecret = signer.webhooks.generateTestHeaderString({ payload, secret: 'whsec_someone_else' });
    const expired = signer.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET, timestamp: Math.floor(Date.now() / 1000) - 3600 });
    for (const [body, sig] of [
      [tampered, signature],
      [payload, wrongSecret],
      [payload, expired],
      [payload, 'garbage'],
      [payload, undefined],
    ] as const) {
      const res = await postWebhook(env, body, sig);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('INVALID_SIGNATURE');
      expect(res.body.error.suggestion).toMatch(/STRIPE_WEBHOOK_SECRET/);
    }
    expect(await accountOf(projectId)).toBeUndefined();

    const other = stripeEvent('invoice.paid', { id: 'in_1', object: 'invoice' });
    expect((await postWebhook(env, other.payload, other.signature)).body).toEqual({ received: true, applied: false });
    // A checkout for a project that does not exist is acknowledged, not applied.
    const ghost = checkoutCompleted('prj_does_not_exist', 'cus_ghost', 'sub_ghost');
    expect((await postWebhook(env, ghost.payload, ghost.signature)).body).toEqual({ received: true, applied: false });
  });
});

describe('billing off (no STRIPE_* settings)', () => {
  test('checkout, portal, invoices and the webhook answer 404 BILLING_DISABLED; /config says so; caps still work', async () => {
    const { owner, member, projectId } = await projectWithMembers(off);
    const calls = [
      off.http().post(`${base(projectId)}/checkout`).set('Cookie', owner.cookie).send({}),
      off.http().post(`${base(projectId)}/billing-portal`).set('Cookie', owner.cookie).send({}),
      off.http().get(`${base(projectId)}/billing-invoices`).set('Cookie', member.cookie),
      off.http().post('/webhooks/incoming/billing').set('Stripe-Signature', 't=1,v1=x').send('{}'),
    ];
    for (const res of await Promise.all(calls)) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('BILLING_DISABLED');
      expect(res.body.error.message).toMatch(/not enabled/);
      expect(res.body.error.suggestion).toMatch(/STRIPE_SECRET_KEY/);
    }
    expect((await off.http().get('/config')).body.features.billing).toEqual({ enabled: false });
    expect((await env.http().get('/config')).body.features.billing).toEqual({ enabled: true });

    const put = await off.http().put(`${base(projectId)}/billing-limits`).set('Cookie', owner.cookie).send({ transactional: 10 });
    expect(put.status).toBe(200);
    const consumption = await off.http().get(`${base(projectId)}/billing-consumption`).set('Cookie', member.cookie);
    expect(consumption.status).toBe(200);
    expect(consumption.body.categories.transactional).toEqual({ used: 0, limit: 10, refused: 0 });
  });
});
