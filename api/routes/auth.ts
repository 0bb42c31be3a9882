import type { Request } from 'express';
import { decoyHash } from '../../db/accounts/passwords';
import { logIn, requestPasswordReset, requestVerification, resetPassword, signUp, verifyEmail } from '../../db/accounts/users';
import { AppError } from '../../errors';
import { OAUTH_PROVIDERS } from '../../oauth/provider';
import { authPages } from '../auth-pages';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import {
  acceptedResponse,
  loginBody,
  oauthConfigResponse,
  requestResetBody,
  resetPasswordBody,
  signupBody,
  tokenBody,
  tokenQuery,
  userResponse,
} from '../schemas/auth';
import { clearSessionCookie, revokeRequestSession, setSessionCookie } from '../session';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { accountMail } from '../use-cases/account-mail';

const TAG = 'Authentication';

/** Sign-up, sign-in and the account mail flows of the dashboard (docs/accounts-and-roles.md). */
export function registerAuthRoutes(api: RouteRegistry, deps: AppDeps): void {
  const { config } = deps;
  // Made now, so the first login with an unknown email takes no longer than any other.
  void decoyHash();
  const clientIp = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';
  const attemptLimit = (req: Request) => ({ ip: clientIp(req), perMinute: config.auth.loginAttemptsPerMinute, now: deps.clock() });
  const mail = accountMail(deps);

  api.add({
    method: 'post',
    path: '/auth/signup',
    tag: TAG,
    summary: 'Create an account, sign it in (session cookie) and send a verification email (rate limited per IP)',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'none',
    body: signupBody,
    response: userResponse,
    status: 201,
    handler: async ({ scope, body, req, res }) => {
      if (config.disableSignups) {
        throw new AppError(403, 'SIGNUPS_DISABLED', 'Sign-ups are disabled on this deployment', {
          suggestion: 'Ask the operator for an account (DISABLE_SIGNUPS is set).',
        });
      }
      const signedIn = await signUp(scope.em, body, mail, attemptLimit(req));
      await setSessionCookie(res, config, deps.sessionSecret, signedIn.session);
      return { user: signedIn.user };
    },
  });

  api.add({
    method: 'post',
    path: '/auth/login',
    tag: TAG,
    summary: 'Sign in with email and password; sets the session cookie (rate limited per account and per IP)',
    auth: 'none',
    body: loginBody,
    response: userResponse,
    handler: async ({ scope, body, req, res }) => {
      const signedIn = await logIn(scope.em, body, attemptLimit(req));
      await setSessionCookie(res, config, deps.sessionSecret, signedIn.session);
      return { user: signedIn.user };
    },
  });

  api.add({
    method: 'get',
    path: '/auth/logout',
    tag: TAG,
    summary: 'Sign out: the session stops working at once (also in copies of the cookie), and the cookie is cleared',
    auth: 'none',
    response: acceptedResponse,
    handler: async ({ req, res, scope }) => {
      await revokeRequestSession(req, scope.em, deps.sessionSecret);
      clearSessionCookie(res, config);
      return { success: true as const, message: 'Signed out' };
    },
  });

  api.add({
    method: 'get',
    path: '/auth/oauth-config',
    tag: TAG,
    summary: 'OAuth providers users can sign in with (GET /auth/oauth/:provider); the same as /config authProviders',
    auth: 'none',
    response: oauthConfigResponse,
    handler: () => ({
      providers: OAUTH_PROVIDERS.filter((p) => deps.oauth[p] !== undefined),
      github: deps.oauth.github !== undefined,
      google: deps.oauth.google !== undefined,
    }),
  });

  api.add({
    method: 'post',
    path: '/auth/request-verification',
    tag: TAG,
    summary: 'Send a new verification email to the signed-in user (earlier links stop working; limited per account and IP)',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'session',
    response: acceptedResponse,
    status: 202,
    handler: async ({ scope, user, req }) => {
      await requestVerification(scope.em, user, mail, attemptLimit(req));
      return { success: true as const, message: `A verification email is on its way to ${user.email}` };
    },
  });

  api.add({
    method: 'post',
    path: '/auth/verify-email',
    tag: TAG,
    summary: 'Confirm the email address with the token from the verification email (single use)',
    auth: 'none',
    body: tokenBody,
    response: userResponse,
    handler: async ({ scope, body }) => ({ user: await verifyEmail(scope.em, body.token) }),
  });

  api.add({
    method: 'get',
    path: '/auth/verify-email',
    tag: TAG,
    summary: 'The link in the verification email: confirms the address and answers a small page (HTML)',
    auth: 'none',
    query: tokenQuery,
    raw: true,
    handler: async ({ scope, query, res }) => {
      try {
        const user = await verifyEmail(scope.em, query.token);
        res.type('html').send(authPages.verified(user.email));
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'INVALID_TOKEN')) throw err;
        res.status(400).type('html').send(authPages.invalidLink(err.message));
      }
    },
  });

  api.add({
    method: 'post',
    path: '/auth/request-password-reset',
    tag: TAG,
    summary: 'Email a password reset link; answers the same whether or not the account exists (limited per address and IP)',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'none',
    body: requestResetBody,
    response: acceptedResponse,
    status: 202,
    handler: async ({ scope, body, req }) => {
      await requestPasswordReset(scope.em, body.email, mail, attemptLimit(req));
      return { success: true as const, message: 'If an account exists for this email, a reset link is on its way' };
    },
  });

  api.add({
    method: 'get',
    path: '/auth/reset-password',
    tag: TAG,
    summary: 'The link in the reset email: a form for the new password, which posts to POST /auth/reset-password (HTML)',
    auth: 'none',
    query: tokenQuery,
    raw: true,
    handler: ({ query, res }) => void res.type('html').send(authPages.resetForm(query.token)),
  });

  api.add({
    method: 'post',
    path: '/auth/reset-password',
    tag: TAG,
    summary: 'Set a new password with the token from the reset email (single use); every existing session ends',
    auth: 'none',
    body: resetPasswordBody,
    response: acceptedResponse,
    handler: async ({ scope, body }) => {
      await resetPassword(scope.em, body.token, body.password);
      return { success: true as const, message: 'Password changed; sign in with the new one' };
    },
  });
}
