/**
 * Sign-in through an OAuth 2 provider (authorization-code flow), in the service's own terms:
 * the routes and db/accounts/users.ts never see a provider's endpoints or payloads. github.ts and google.ts
 * are the implementations; tests run them against a local server speaking the same protocol.
 */
export type OAuthProviderId = 'github' | 'google';
export const OAUTH_PROVIDERS: readonly OAuthProviderId[] = ['github', 'google'];

/** Who the provider says signed in. Only a verified email signs anyone in. */
export interface OAuthIdentity {
  email: string;
  emailVerified: boolean;
  name: string | null;
}

export interface OAuthProvider {
  readonly id: OAuthProviderId;
  /** Where the browser goes to sign in; the provider sends it back to `redirectUri` with `code` and `state`. */
  authorizeUrl(state: string, redirectUri: string): string;
  /** Trades the code for an access token and reads the user's email and name with it. */
  identify(code: string, redirectUri: string): Promise<OAuthIdentity>;
}

/** The provider refused or answered something unusable: the sign-in fails, nothing is written. */
export class OAuthFailure extends Error {}

/** One JSON request to a provider; any non-2xx or non-JSON answer is an OAuthFailure. */
export async function providerJson<T>(what: string, url: string, init: RequestInit): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new OAuthFailure(`${what}: ${(err as Error).message}`);
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new OAuthFailure(`${what}: HTTP ${res.status}, not JSON`);
  }
  if (!res.ok) throw new OAuthFailure(`${what}: HTTP ${res.status} ${text.slice(0, 200)}`);
  return body as T;
}

export interface OAuthClientConfig {
  clientId: string;
  clientSecret: string;
  /** Replaces the provider's hosts (tests); undefined: the public service. */
  baseUrl: string | undefined;
}
