import { queryOptions } from '@tanstack/react-query';
import { api } from './client';

export type RecordState = 'ok' | 'missing' | 'mismatch' | 'unreachable';
export type RecordPurpose = 'dkim' | 'spf' | 'dmarc' | 'return-path';

/** A domain as the service answers it (api/schemas/domains.ts domainSchema). */
export interface Domain {
  id: string;
  domain: string;
  status: 'pending' | 'verified';
  records: Array<{ type: 'TXT' | 'MX' | 'CNAME'; name: string; value: string; purpose: RecordPurpose }>;
  lastCheck: {
    verified: boolean;
    conclusive: boolean;
    returnPath?: { ready: boolean; conclusive: boolean };
    records: { dkim: RecordState; spf: RecordState; dmarc: RecordState; returnPathMx?: RecordState; returnPathSpf?: RecordState };
  } | null;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  returnPathVerifiedAt: string | null;
  createdAt: string;
  /** Whether mail may be sent from it now: verified, or any domain in outbox mode. */
  sending: { allowed: boolean; reason: string };
}

/** The project's domains; the Domains page adds its polling, the sender hints a longer freshness. */
export function domainsQuery(projectId: string) {
  return queryOptions({
    queryKey: ['domains', projectId],
    queryFn: () => api<Domain[]>(`/domains/project/${encodeURIComponent(projectId)}`),
  });
}
