import { useQuery } from '@tanstack/react-query';
import { api } from './client';

/** A contact as the service answers it (api/schemas/contacts.ts contactSchema). */
export interface Contact {
  id: string;
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

/** A contact field as GET /contacts/fields describes it (api/schemas/contacts.ts fieldDescriptor). */
export interface ContactField {
  field: string;
  type: 'string' | 'number' | 'boolean' | 'date';
  isCustom: boolean;
  /** Share of the contacts that have it, 0..1. */
  coverage: number;
}

/** The project's contact fields: the contact list's columns, and the fields a condition can name. */
export function useContactFields(projectId: string, { enabled = true }: { enabled?: boolean } = {}) {
  return useQuery({
    queryKey: ['contact-fields', projectId],
    queryFn: async () => (await api<{ fields: ContactField[] }>('/contacts/fields')).fields,
    enabled,
    staleTime: 60_000,
  });
}
