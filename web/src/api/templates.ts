import { useQuery } from '@tanstack/react-query';
import { api, type CursorPage } from './client';

export type TemplateType = 'MARKETING' | 'TRANSACTIONAL';

/** A template as the service answers it (api/schemas/templates.ts). */
export interface Template {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string | null;
  fromName: string | null;
  replyTo: string | null;
  type: TemplateType;
  createdAt: string;
  updatedAt: string;
}

/**
 * The project's templates to choose from (a campaign's starting point, a journey's email step): the
 * newest hundred. Under the templates list's key, so a saved or deleted template shows here too.
 */
export function useTemplateChoices(projectId: string) {
  return useQuery({
    queryKey: ['templates', projectId, 'choices'],
    queryFn: async () => (await api<CursorPage<Template>>('/templates', { query: { limit: 100 } })).data,
    staleTime: 30_000,
  });
}
