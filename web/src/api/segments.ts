import { useQuery } from '@tanstack/react-query';
import type { Condition } from '../components/ConditionBuilder';
import { api } from './client';
import type { Contact } from './contacts';

export type SegmentType = 'DYNAMIC' | 'STATIC';

/** A segment as the service answers it (api/schemas/segments.ts). */
export interface Segment {
  id: string;
  name: string;
  description: string | null;
  type: SegmentType;
  condition: Condition | null;
  trackMembership: boolean;
  memberCount: number;
  memberCountUpdatedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** GET /segments/:id/contacts: one page of a segment's members. */
export interface MembersPage {
  data: Contact[];
  total: number;
  page: number;
  pageSize: number;
}

/** The project's segments, one unpaged list: the segment list, and every choice of a segment (audience, filter, condition). */
export function useSegments(projectId: string, { enabled = true }: { enabled?: boolean } = {}) {
  return useQuery({ queryKey: ['segments', projectId], queryFn: () => api<Segment[]>('/segments'), enabled });
}
