import { z } from 'zod';
import { getSubscription, setSubscription } from '../../db/messages/subscriptions';
import { verifyContactToken } from '../../mail/links';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { subscriptionPages } from '../subscription-pages';

const tokenParams = z.object({ token: z.string().min(1).max(500) });

/** The pages behind unsubscribeUrl / subscribeUrl / manageUrl: no key, the signed token is the credential. */
export function registerSubscriptionRoutes(api: RouteRegistry, deps: AppDeps): void {
  const contactOf = (token: string) => verifyContactToken(deps.linkSecret, token);

  for (const subscribed of [false, true]) {
    const path = subscribed ? '/subscribe/:token' : '/unsubscribe/:token';
    api.add({
      method: 'get',
      path,
      tag: 'Subscription pages',
      summary: `Confirmation page before ${subscribed ? 'subscribing' : 'unsubscribing'} (HTML)`,
      auth: 'none',
      params: tokenParams,
      raw: true,
      handler: async ({ scope, params, res }) => {
        const contactId = contactOf(params.token);
        const state = contactId ? await getSubscription(scope.em, contactId) : undefined;
        if (!state) return void res.status(404).type('html').send(subscriptionPages.invalid());
        const html = subscribed
          ? subscriptionPages.confirmSubscribe(state, params.token)
          : subscriptionPages.confirmUnsubscribe(state, params.token);
        res.type('html').send(html);
      },
    });
    api.add({
      method: 'post',
      path,
      tag: 'Subscription pages',
      summary: subscribed
        ? 'Subscribe the contact again (HTML)'
        : 'Unsubscribe the contact; also the RFC 8058 one-click target of List-Unsubscribe-Post (HTML)',
      auth: 'none',
      params: tokenParams,
      raw: true,
      handler: async ({ scope, params, res }) => {
        const contactId = contactOf(params.token);
        const state = contactId ? await setSubscription(scope.em, contactId, subscribed) : undefined;
        if (!state) return void res.status(404).type('html').send(subscriptionPages.invalid());
        res.type('html').send(subscriptionPages.done(state, params.token));
      },
    });
  }

  api.add({
    method: 'get',
    path: '/manage/:token',
    tag: 'Subscription pages',
    summary: 'Subscription status with a button to unsubscribe or subscribe again (HTML)',
    auth: 'none',
    params: tokenParams,
    raw: true,
    handler: async ({ scope, params, res }) => {
      const contactId = contactOf(params.token);
      const state = contactId ? await getSubscription(scope.em, contactId) : undefined;
      if (!state) return void res.status(404).type('html').send(subscriptionPages.invalid());
      res.type('html').send(subscriptionPages.manage(state, params.token));
    },
  });
}
