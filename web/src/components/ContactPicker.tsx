import { useQuery } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { api, type CursorPage } from '../api/client';
import type { Contact } from '../api/contacts';
import { useProject } from '../app/project';
import { ErrorNotice, Loading, TextField } from './ui';
import { useDebounced } from './useDebounced';
import './ContactPicker.css';

export type ContactRef = Pick<Contact, 'id' | 'email'>;

/**
 * Chooses one contact of the project by searching their emails (a template preview, a journey's
 * test run). The choice is said in a status line, so a screen reader hears it; the search empties
 * once a contact is chosen.
 */
export function ContactPicker({
  label,
  value,
  onChange,
  chosenPrefix,
  none,
  clearLabel = 'Clear',
  error,
}: {
  /** The search field's label. */
  label: string;
  value: ContactRef | null;
  onChange: (contact: ContactRef | null) => void;
  /** Before the chosen email: "Rendered for". */
  chosenPrefix: string;
  /** What holds while no contact is chosen. */
  none: ReactNode;
  clearLabel?: string;
  /** The service's complaint about the choice (a field error). */
  error?: string;
}) {
  const { projectId } = useProject();
  const [search, setSearch] = useState('');
  const term = useDebounced(search.trim(), 300);
  const results = useQuery({
    queryKey: ['contact-search', projectId, term],
    queryFn: async () => (await api<CursorPage<Contact>>('/contacts', { query: { search: term, limit: 8 } })).data,
    enabled: term.length > 0,
    staleTime: 10_000,
  });
  // Gone as soon as the field is emptied (a contact chosen), not once the pause is over.
  const hits = term.length > 0 && search.trim() !== '' ? results.data : undefined;
  return (
    <div className="contact-picker">
      <p className="picked" role="status">
        {value ? (
          <>
            {chosenPrefix} <strong>{value.email}</strong>{' '}
            <button type="button" className="button-small" onClick={() => onChange(null)}>
              {clearLabel}
            </button>
          </>
        ) : (
          <span className="muted">{none}</span>
        )}
      </p>
      <TextField
        label={label}
        type="search"
        autoComplete="off"
        placeholder="Search by email"
        value={search}
        onChange={(e) => setSearch(e.target.value)}
        error={error}
      />
      {term && results.isFetching && !hits ? <Loading label="Searching…" /> : null}
      <ErrorNotice error={results.error} />
      {hits ? (
        hits.length === 0 ? (
          <p className="muted" role="status">
            No contact’s email contains “{term}”.
          </p>
        ) : (
          <ul className="contact-hits" aria-label="Matching contacts">
            {hits.map((c) => (
              <li key={c.id}>
                <button
                  type="button"
                  className="button-small"
                  onClick={() => {
                    onChange({ id: c.id, email: c.email });
                    setSearch('');
                  }}
                >
                  Choose {c.email}
                </button>
              </li>
            ))}
          </ul>
        )
      ) : null}
    </div>
  );
}
