import { useQuery } from '@tanstack/react-query';
import { api } from './client';

/** GET /events/names: the event names tracked in the project so far. */
export interface EventName {
  name: string;
  count: number;
  lastSeenAt: string;
}

/** The project's tracked event names: suggestions for triggers and awaited events, and the events a condition can name. */
export function useEventNames(projectId: string, { enabled = true }: { enabled?: boolean } = {}) {
  return useQuery({
    queryKey: ['event-names', projectId],
    queryFn: async () => (await api<{ names: EventName[] }>('/events/names')).names,
    enabled,
    staleTime: 60_000,
  });
}
