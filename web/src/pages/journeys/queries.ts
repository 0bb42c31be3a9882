import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client';
import type { JourneyDetail, SystemEvent } from './types';

/** The reads the journey pages share, with their cache keys. */

export const journeyKey = (id: string) => ['journey', id] as const;
export const journeysKey = ['journeys'] as const;
export const executionsKey = (id: string) => ['journey-executions', id] as const;

export function useJourney(id: string) {
  return useQuery({ queryKey: journeyKey(id), queryFn: () => api<JourneyDetail>(`/workflows/${id}`) });
}

export function useSystemEvents() {
  return useQuery({
    queryKey: ['events', 'system'],
    queryFn: async () => (await api<{ events: SystemEvent[] }>('/events/system')).events,
    staleTime: Infinity,
  });
}
