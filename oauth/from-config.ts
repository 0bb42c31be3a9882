import type { Config } from '../config';
import { createGithubProvider } from './github';
import { createGoogleProvider } from './google';
import type { OAuthProvider, OAuthProviderId } from './provider';

/** The providers whose client id and secret are configured; the others stay off. */
export function oauthProvidersFromConfig(config: Pick<Config, 'oauth'>): Partial<Record<OAuthProviderId, OAuthProvider>> {
  return {
    ...(config.oauth.github ? { github: createGithubProvider(config.oauth.github) } : {}),
    ...(config.oauth.google ? { google: createGoogleProvider(config.oauth.google) } : {}),
  };
}
