import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ApiError } from './client';

export type Role = 'OWNER' | 'ADMIN' | 'MEMBER';

export interface Me {
  id: string;
  email: string;
  name: string | null;
  emailVerified: boolean;
  createdAt: string;
  memberships: Array<{ projectId: string; projectName: string; role: Role }>;
}

export const meKey = ['me'] as const;

/** The signed-in user, or null when there is no session (a 401 is an answer here, not an error). */
export function useMe() {
  return useQuery({
    queryKey: meKey,
    queryFn: async (): Promise<Me | null> => {
      try {
        return await api<Me>('/users/@me', { project: null });
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return null;
        throw err;
      }
    },
    staleTime: 30_000,
  });
}

export function useSignOut() {
  const client = useQueryClient();
  return async () => {
    await api('/auth/logout', { project: null });
    client.clear();
    client.setQueryData(meKey, null);
  };
}

/** OWNER > ADMIN > MEMBER, as the service ranks them. */
export function roleAtLeast(role: Role | undefined, needed: Role): boolean {
  const rank: Record<Role, number> = { MEMBER: 1, ADMIN: 2, OWNER: 3 };
  return role !== undefined && rank[role] >= rank[needed];
}
