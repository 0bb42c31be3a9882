import { randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { signInWithProvider } from '../../db/accounts/users';
import { AppError } from '../../errors';
import { OAUTH_PROVIDERS, OAuthFailure, type OAuthProviderId } from '../../oauth/provider';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cookieValue, setSessionCookie } from '../session';

const TAG = 'Authentication';
/** `<provider>:<state>` between the redirect to the provider and its callback; ten minutes. */
const STATE_COOKIE = 'tidings_oauth_state';
const STATE_SECONDS = 600;

const providerParams = z.object({ provider: z.enum(OAUTH_PROVIDERS as [OAuthProviderId, ...OAuthProviderId[]]) });
const callbackQuery = z.object({
  code: z.string().min(1).max(2048).optional(),
  state: z.string().max(256).optional(),
  error: z.string().max(256).optional().describe('Set by the provider when the user declined'),
});

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/**
 * Sign-in with GitHub or Google (OAuth 2 authorization code). The state is a random value kept in
 * an httpOnly cookie and echoed by the provider, so a callback the browser did not start is refused.
 * The provider's verified email signs in the account with that email, or creates one.
 */
export function registerOAuthRoutes(api: RouteRegistry, deps: AppDeps): void {
  const { config } = deps;
  const redirectUri = (provider: OAuthProviderId) => `${config.publicUrl}/auth/oauth/${provider}/callback`;
  const cookie = { httpOnly: true, sameSite: 'lax' as const, secure: config.publicUrl.startsWith('https:'), path: '/auth/oauth' };
  const configured = (provider: OAuthProviderId) => {
    const found = deps.oauth[provider];
    if (!found) {
      throw new AppError(404, 'OAUTH_PROVIDER_NOT_CONFIGURED', `Sign-in with ${provider} is not configured on this deployment`, {
        suggestion: `The operator sets OAUTH_${provider.toUpperCase()}_CLIENT_ID and OAUTH_${provider.toUpperCase()}_CLIENT_SECRET; GET /auth/oauth-config lists what is on.`,
      });
    }
    return found;
  };

  api.add({
    method: 'get',
    path: '/auth/oauth/:provider',
    tag: TAG,
    summary: 'Start signing in with a provider: redirects (302) to it; 404 when it is not configured',
    // Documentation only: a raw route sets its own status.
    status: 302,
    auth: 'none',
    params: providerParams,
    raw: true,
    handler: ({ params, res }) => {
      const provider = configured(params.provider);
      const state = randomBytes(24).toString('base64url');
      res.cookie(STATE_COOKIE, `${provider.id}:${state}`, { ...cookie, maxAge: STATE_SECONDS * 1000 });
      res.redirect(302, provider.authorizeUrl(state, redirectUri(provider.id)));
    },
  });

  api.add({
    method: 'get',
    path: '/auth/oauth/:provider/callback',
    tag: TAG,
    summary:
      "The provider's redirect back: checks the state, signs in (or creates) the account of the provider's verified email, sets the session cookie and redirects to the dashboard",
    // Documentation only: a raw route sets its own status.
    status: 302,
    auth: 'none',
    params: providerParams,
    query: callbackQuery,
    raw: true,
    handler: async ({ scope, params, query, req, res }) => {
      const provider = configured(params.provider);
      const expected = cookieValue(req, STATE_COOKIE);
      res.clearCookie(STATE_COOKIE, cookie);
      if (query.error) {
        throw new AppError(400, 'OAUTH_DENIED', `${provider.id} did not sign you in: ${query.error}`, { suggestion: 'Start again from the sign-in page.' });
      }
      if (!query.code || !query.state || !expected || !sameText(expected, `${provider.id}:${query.state}`)) {
        throw new AppError(400, 'OAUTH_STATE_MISMATCH', 'This sign-in was not started from this browser, or it took too long', {
          suggestion: `Start again with GET /auth/oauth/${provider.id}.`,
        });
      }
      let identity;
      try {
        identity = await provider.identify(query.code, redirectUri(provider.id));
      } catch (err) {
        if (!(err instanceof OAuthFailure)) throw err;
        req.log.warn({ err, provider: provider.id }, 'OAuth sign-in failed at the provider');
        throw new AppError(502, 'OAUTH_PROVIDER_ERROR', `${provider.id} did not confirm the sign-in`, { suggestion: 'Try again in a moment.' });
      }
      if (!identity.emailVerified) {
        throw new AppError(403, 'OAUTH_EMAIL_UNVERIFIED', `Your ${provider.id} email ${identity.email} is not verified there`, {
          suggestion: `Verify it with ${provider.id}, or sign up with POST /auth/signup.`,
        });
      }
      const signedIn = await signInWithProvider(scope.em, identity, { allowSignup: !config.disableSignups });
      await setSessionCookie(res, config, deps.sessionSecret, signedIn.session);
      res.redirect(302, `${config.publicUrl}/app/`);
    },
  });
}
