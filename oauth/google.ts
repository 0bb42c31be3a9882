import { type OAuthClientConfig, OAuthFailure, type OAuthIdentity, type OAuthProvider, providerJson } from './provider';

/** Google's OpenID Connect flow; the email and its verification come from the userinfo endpoint. */
export function createGoogleProvider(config: OAuthClientConfig): OAuthProvider {
  const accounts = config.baseUrl ?? 'https://accounts.google.com';
  const tokens = config.baseUrl ?? 'https://oauth2.googleapis.com';
  const userinfo = config.baseUrl ?? 'https://openidconnect.googleapis.com';
  return {
    id: 'google',
    authorizeUrl(state, redirectUri) {
      const url = new URL(`${accounts}/o/oauth2/v2/auth`);
      url.search = new URLSearchParams({
        client_id: config.clientId,
        redirect_uri: redirectUri,
        response_type: 'code',
        scope: 'openid email profile',
        state,
      }).toString();
      return url.toString();
    },
    async identify(code, redirectUri): Promise<OAuthIdentity> {
      const token = await providerJson<{ access_token?: string }>('Google token', `${tokens}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          client_id: config.clientId,
          client_secret: config.clientSecret,
          code,
          redirect_uri: redirectUri,
          grant_type: 'authorization_code',
        }).toString(),
      });
      if (!token.access_token) throw new OAuthFailure('Google token: no access_token');
      const info = await providerJson<{ email?: string; email_verified?: boolean; name?: string }>('Google userinfo', `${userinfo}/v1/userinfo`, {
        headers: { authorization: `Bearer ${token.access_token}` },
      });
      if (!info.email) throw new OAuthFailure('Google userinfo: no email');
      return { email: info.email.trim().toLowerCase(), emailVerified: info.email_verified === true, name: info.name ?? null };
    },
  };
}
