import type { QueryClient } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { useServiceConfig } from '../../api/config';
import { meKey } from '../../api/session';

/** The frame of the signed-out pages: the product's name and one form. */
export function AuthFrame({ title, children }: { title: string; children: ReactNode }) {
  return (
    <main id="main" className="auth">
      <p className="brand">Tidings</p>
      <h1>{title}</h1>
      {children}
    </main>
  );
}

const PROVIDER_NAMES = { github: 'GitHub', google: 'Google' } as const;

/** One button per OAuth provider the deployment has configured (GET /config); nothing when there is none. */
export function OAuthButtons() {
  const config = useServiceConfig();
  const on = config.data?.features.authProviders;
  const providers = on ? (Object.keys(PROVIDER_NAMES) as Array<keyof typeof PROVIDER_NAMES>).filter((p) => on[p]) : [];
  if (!providers.length) return null;
  return (
    <div className="oauth">
      {providers.map((p) => (
        // A full page load: the service redirects to the provider, which comes back to /auth/oauth/:provider/callback.
        <a key={p} className="button" href={`/auth/oauth/${p}`}>
          Continue with {PROVIDER_NAMES[p]}
        </a>
      ))}
    </div>
  );
}

/**
 * After the session changed (signed in, signed up, password reset): the cached user is dropped, so
 * the next page waits for the new one instead of acting on the old answer.
 */
export function sessionChanged(client: QueryClient): Promise<void> {
  return client.resetQueries({ queryKey: meKey });
}
