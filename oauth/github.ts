import { type OAuthClientConfig, OAuthFailure, type OAuthIdentity, type OAuthProvider, providerJson } from './provider';

/**
 * GitHub's OAuth app flow. The email comes from /user/emails (the primary, verified one), since
 * /user shows only a public email, if any.
 */
export function createGithubProvider(config: OAuthClientConfig): OAuthProvider {
  const web = config.baseUrl ?? 'https://github.com';
  const api = config.baseUrl ?? 'https://api.github.com';
  return {
    id: 'github',
    authorizeUrl(state, redirectUri) {
      const url = new URL(`${web}/login/oauth/authorize`);
      url.search = new URLSearchParams({ client_id: config.clientId, redirect_uri: redirectUri, scope: 'read:user user:email', state }).toString();
      return url.toString();
    },
    async identify(code, redirectUri): Promise<OAuthIdentity> {
      const token = await providerJson<{ access_token?: string; error?: string }>('GitHub token', `${web}/login/oauth/access_token`, {
        method: 'POST',
        headers: { accept: 'application/json', 'content-type': 'application/json' },
        body: JSON.stringify({ client_id: config.clientId, client_secret: config.clientSecret, code, redirect_uri: redirectUri }),
      });
      // GitHub answers 200 with an `error` field when the code is bad or used.
      if (!token.access_token) throw new OAuthFailure(`GitHub token: ${token.error ?? 'no access_token'}`);
      const headers = { accept: 'application/vnd.github+json', authorization: `Bearer ${token.access_token}`, 'user-agent': 'tidings' };
      const [user, emails] = await Promise.all([
        providerJson<{ name?: string | null; login?: string }>('GitHub user', `${api}/user`, { headers }),
        providerJson<{ email: string; primary: boolean; verified: boolean }[]>('GitHub emails', `${api}/user/emails`, { headers }),
      ]);
      const primary = Array.isArray(emails) ? emails.find((e) => e.primary) : undefined;
      if (!primary) throw new OAuthFailure('GitHub emails: no primary email');
      return { email: primary.email.trim().toLowerCase(), emailVerified: primary.verified === true, name: user.name ?? user.login ?? null };
    },
  };
}
