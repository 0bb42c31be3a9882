import { useQuery } from '@tanstack/react-query';
import { api } from './client';

/** GET /config: what this deployment offers (no authentication). */
export interface ServiceConfig {
  environment: 'development' | 'production' | 'test';
  urls: { api: string; dashboard: string };
  features: {
    billing: { enabled: boolean };
    storage: { objectStorage: boolean };
    authProviders: { github: boolean; google: boolean };
    /** Off: outbox mode, mail is written to the local outbox instead of being sent. */
    smtp: { enabled: boolean };
    signups: { enabled: boolean };
  };
}

/** The deployment's configuration, the one read of GET /config; it changes only with a restart, so it is read once. */
export function useServiceConfig() {
  return useQuery({ queryKey: ['config'], queryFn: () => api<ServiceConfig>('/config', { project: null }), staleTime: Infinity });
}

/** True in outbox mode, false with a relay, undefined until /config has answered. */
export function useOutboxMode(): boolean | undefined {
  const config = useServiceConfig();
  return config.data ? !config.data.features.smtp.enabled : undefined;
}
