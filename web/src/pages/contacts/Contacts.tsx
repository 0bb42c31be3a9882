import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useCallback, useEffect, useRef, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api/client';
import { type Contact, useContactFields } from '../../api/contacts';
import { type MembersPage, useSegments } from '../../api/segments';
import { useProject } from '../../app/project';
import { type Condition, ConditionBuilder, emptyCondition, isCompleteCondition } from '../../components/ConditionBuilder';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, fieldError, Loading, PageHeader, SelectField, TextField } from '../../components/ui';
import { BulkJob, type BulkJobState, type BulkOperation } from './BulkJob';
import { SubscriptionBadge } from './SubscriptionBadge';
import './contacts.css';

const PAGE_SIZE = 20;

/** A data value in one cell: scalars as they are, anything else as compact JSON. */
function formatValue(value: unknown): string {
  if (value === undefined || value === null) return '—';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}
/** The "Show" option that opens the condition builder. */
const CONDITION = '__condition';
/** The data fields shown as columns: the most common ones, so most cells have a value. */
const DATA_COLUMNS = 3;

export default function Contacts() {
  const { projectId } = useProject();
  const client = useQueryClient();
  const [params, setParams] = useSearchParams();
  const search = params.get('search') ?? '';
  const subscribed = params.get('subscribed') ?? '';
  const segmentId = params.get('segment') ?? '';
  const condition = params.get('condition') ?? '';
  const [searchInput, setSearchInput] = useState(search);
  // "Matching a condition" is chosen before any condition is applied: the builder shows, the list waits.
  const [conditionChosen, setConditionChosen] = useState(condition !== '');

  const list = useCursorList<Contact>(['contacts', projectId, 'list'], '/contacts', {
    limit: PAGE_SIZE,
    search: search || undefined,
    subscribed: subscribed || undefined,
    condition: condition || undefined,
  });
  const [segmentPage, setSegmentPage] = useState(1);
  const members = useQuery({
    queryKey: ['contacts', projectId, 'segment', segmentId, segmentPage],
    queryFn: () => api<MembersPage>(`/segments/${encodeURIComponent(segmentId)}/contacts`, { query: { page: segmentPage, pageSize: PAGE_SIZE } }),
    enabled: segmentId !== '',
    placeholderData: keepPreviousData,
  });
  const segments = useSegments(projectId);
  const fields = useContactFields(projectId);
  const dataColumns = (fields.data ?? [])
    .filter((f) => f.isCustom && f.coverage > 0)
    .sort((a, b) => b.coverage - a.coverage || a.field.localeCompare(b.field))
    .slice(0, DATA_COLUMNS)
    .map((f) => f.field.slice('data.'.length));

  const [selected, setSelected] = useState<Set<string>>(new Set());
  // useCursorList hands out a new reset on every render; the callbacks below must stay stable.
  const resetRef = useRef(list.reset);
  useEffect(() => {
    resetRef.current = list.reset;
  });
  const reset = useCallback(() => resetRef.current(), []);
  // Any filter change starts again from the first page, with nothing selected (a selection hidden by
  // the new filter would still be acted on).
  const setFilter = useCallback(
    (changes: Record<string, string>) => {
      setParams(
        (prev) => {
          const next = new URLSearchParams(prev);
          for (const [name, value] of Object.entries(changes)) {
            if (value) next.set(name, value);
            else next.delete(name);
          }
          return next;
        },
        { replace: true },
      );
      reset();
      setSegmentPage(1);
      setSelected(new Set());
    },
    [setParams, reset],
  );
  // The search applies once typing pauses, not on every key.
  useEffect(() => {
    if (searchInput.trim() === search) return;
    const timer = setTimeout(() => setFilter({ search: searchInput.trim() }), 300);
    return () => clearTimeout(timer);
  }, [searchInput, search, setFilter]);

  const [jobs, setJobs] = useState<string[]>([]);
  const bulk = useMutation({
    mutationFn: (operation: BulkOperation) =>
      api<{ jobId: string }>(`/contacts/bulk-${operation}`, { method: 'POST', body: { ids: [...selected] } }),
    onSuccess: ({ jobId }) => {
      setJobs((j) => [jobId, ...j]);
      setSelected(new Set());
    },
  });
  const onJobFinished = useCallback(
    (job: BulkJobState) => {
      if (job.operation === 'delete') reset();
      void client.invalidateQueries({ queryKey: ['contacts', projectId] });
      void client.invalidateQueries({ queryKey: ['contact-fields', projectId] });
    },
    [client, projectId, reset],
  );

  const inSegment = segmentId !== '';
  const rows = inSegment ? members.data?.data : list.data?.data;
  const loading = inSegment ? members.isPending : list.isPending;
  const error = inSegment ? members.error : list.error;
  const filtered = inSegment || search !== '' || subscribed !== '' || condition !== '';
  const pageIds = rows?.map((c) => c.id) ?? [];
  const allOnPage = pageIds.length > 0 && pageIds.every((id) => selected.has(id));
  const someOnPage = pageIds.some((id) => selected.has(id));
  const toggle = (ids: string[], on: boolean) =>
    setSelected((prev) => {
      const next = new Set(prev);
      for (const id of ids) {
        if (on) next.add(id);
        else next.delete(id);
      }
      return next;
    });

  return (
    <>
      <title>Contacts · Tidings</title>
      <PageHeader title="Contacts" description="The people you send to: search, filter, open one, or act on a selection.">
        <Link className="button button-primary" to={`/p/${projectId}/contacts/import`}>
          Import CSV
        </Link>
      </PageHeader>
      <AddContact projectId={projectId} />

      <section className="card" aria-label="Filters">
        <div className="filters">
          <TextField
            label="Search by email"
            type="search"
            value={searchInput}
            onChange={(e) => setSearchInput(e.target.value)}
            placeholder="part of an address"
            disabled={inSegment}
            hint={inSegment ? 'Not available while a segment is chosen' : undefined}
          />
          <SelectField label="Subscription" value={subscribed} onChange={(e) => setFilter({ subscribed: e.target.value })} disabled={inSegment}>
            <option value="">All</option>
            <option value="true">Subscribed</option>
            <option value="false">Unsubscribed</option>
          </SelectField>
          <SelectField
            label="Show"
            value={segmentId || (conditionChosen ? CONDITION : '')}
            onChange={(e) => {
              const value = e.target.value;
              setConditionChosen(value === CONDITION);
              setFilter({ segment: value === CONDITION ? '' : value, condition: '' });
            }}
          >
            <option value="">All contacts</option>
            <option value={CONDITION}>Contacts matching a condition…</option>
            {(segments.data ?? []).map((s) => (
              <option key={s.id} value={s.id}>
                Members of {s.name}
              </option>
            ))}
          </SelectField>
        </div>
        <ErrorNotice error={segments.error} />
        {conditionChosen && !inSegment ? (
          <ConditionFilter applied={condition} onApply={(c) => setFilter({ condition: c })} />
        ) : null}
      </section>

      {jobs.map((jobId) => (
        <BulkJob key={jobId} jobId={jobId} onFinished={onJobFinished} onDismiss={() => setJobs((j) => j.filter((x) => x !== jobId))} />
      ))}

      {selected.size > 0 ? (
        <div className="bulk-bar" role="region" aria-label="Bulk actions">
          <strong>{selected.size.toLocaleString()} selected</strong>
          <button type="button" className="button-small" disabled={bulk.isPending || selected.size > 1000} onClick={() => bulk.mutate('subscribe')}>
            Subscribe
          </button>
          <button type="button" className="button-small" disabled={bulk.isPending || selected.size > 1000} onClick={() => bulk.mutate('unsubscribe')}>
            Unsubscribe
          </button>
          <ConfirmDialog
            trigger={
              <button type="button" className="button-small button-danger" disabled={bulk.isPending || selected.size > 1000}>
                Delete…
              </button>
            }
            title={`Delete ${selected.size} contact${selected.size === 1 ? '' : 's'}?`}
            description="Their events and segment memberships go with them, and journeys running for them stop. This cannot be undone."
            confirmLabel="Delete contacts"
            pendingLabel="Deleting…"
            onConfirm={() => bulk.mutateAsync('delete')}
          />
          <button type="button" className="button-small" onClick={() => setSelected(new Set())}>
            Clear selection
          </button>
          {selected.size > 1000 ? <p className="field-error">At most 1,000 contacts per action.</p> : null}
        </div>
      ) : null}
      <ErrorNotice error={bulk.error} />

      <ErrorNotice error={error} />
      {loading ? (
        <Loading />
      ) : rows && rows.length === 0 ? (
        <EmptyState>
          {filtered ? (
            'No contact matches these filters.'
          ) : (
            <>
              No contacts yet. <Link to={`/p/${projectId}/contacts/import`}>Import a CSV file</Link> or add one above.
            </>
          )}
        </EmptyState>
      ) : rows ? (
        <>
          <TableScroll label="Contacts">
            <table>
              <caption className="visually-hidden">Contacts</caption>
              <thead>
                <tr>
                  <th scope="col" className="select-cell">
                    <label>
                      <input
                        type="checkbox"
                        checked={allOnPage}
                        ref={(el) => {
                          if (el) el.indeterminate = someOnPage && !allOnPage;
                        }}
                        onChange={(e) => toggle(pageIds, e.target.checked)}
                      />
                      <span className="visually-hidden">Select every contact on this page</span>
                    </label>
                  </th>
                  <th scope="col">Email</th>
                  <th scope="col">Subscription</th>
                  {dataColumns.map((key) => (
                    <th scope="col" key={key}>
                      {key}
                    </th>
                  ))}
                  <th scope="col" className="nowrap">
                    Created
                  </th>
                </tr>
              </thead>
              <tbody>
                {rows.map((c) => (
                  <tr key={c.id}>
                    <td className="select-cell">
                      <label>
                        <input type="checkbox" checked={selected.has(c.id)} onChange={(e) => toggle([c.id], e.target.checked)} />
                        <span className="visually-hidden">Select {c.email}</span>
                      </label>
                    </td>
                    <td className="email-cell">
                      <Link to={`/p/${projectId}/contacts/${c.id}`}>{c.email}</Link>
                    </td>
                    <td>
                      <SubscriptionBadge subscribed={c.subscribed} />
                    </td>
                    {dataColumns.map((key) => (
                      <td key={key} className="cell-value" title={formatValue(c.data[key])}>
                        {formatValue(c.data[key])}
                      </td>
                    ))}
                    <td className="nowrap">{formatDate(c.createdAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          {inSegment && members.data ? (
            <PagePager
              page={members.data.page}
              pages={Math.max(1, Math.ceil(members.data.total / members.data.pageSize))}
              total={members.data.total}
              busy={members.isFetching}
              onPage={setSegmentPage}
            />
          ) : (
            <CursorPager list={list} label="Contacts" />
          )}
        </>
      ) : null}
    </>
  );
}

/**
 * An ad-hoc segment condition for the list: edited freely, applied (to the address, so the list
 * reloads from page 1) only when complete and asked for.
 */
function ConditionFilter({ applied, onApply }: { applied: string; onApply: (json: string) => void }) {
  const [draft, setDraft] = useState<Condition>(() => parseCondition(applied) ?? emptyCondition('segment'));
  const [complete, setComplete] = useState(() => isCompleteCondition(draft));
  const changed = JSON.stringify(draft) !== applied;
  const apply = (event: FormEvent) => {
    event.preventDefault();
    onApply(JSON.stringify(draft));
  };
  return (
    <form onSubmit={apply} className="condition-filter">
      <ConditionBuilder
        label="Contacts matching"
        value={draft}
        onChange={(next, ok) => {
          setDraft(next);
          setComplete(ok);
        }}
      />
      <div className="actions">
        <button type="submit" className="button-primary" disabled={!complete || !changed}>
          Apply condition
        </button>
        {applied ? (
          <button
            type="button"
            onClick={() => {
              setDraft(emptyCondition('segment'));
              onApply('');
            }}
          >
            Clear condition
          </button>
        ) : null}
      </div>
    </form>
  );
}

function parseCondition(json: string): Condition | null {
  if (!json) return null;
  try {
    return JSON.parse(json) as Condition;
  } catch {
    return null;
  }
}

/** Segment members come in numbered pages. */
function PagePager({ page, pages, total, busy, onPage }: { page: number; pages: number; total: number; busy: boolean; onPage: (p: number) => void }) {
  return (
    <nav className="pager" aria-label="Segment members pages">
      <button type="button" onClick={() => onPage(page - 1)} disabled={page <= 1 || busy}>
        Previous
      </button>
      <span>
        Page {page} of {pages} · {total.toLocaleString()} in all
      </span>
      <button type="button" onClick={() => onPage(page + 1)} disabled={page >= pages || busy}>
        Next
      </button>
    </nav>
  );
}

/** A single contact by hand; the service merges into an existing one with the same email. */
function AddContact({ projectId }: { projectId: string }) {
  const client = useQueryClient();
  const [email, setEmail] = useState('');
  const [subscribed, setSubscribed] = useState(true);
  const add = useMutation({
    mutationFn: () => api<Contact & { _meta: { isNew: boolean } }>('/contacts', { method: 'POST', body: { email, subscribed } }),
    onSuccess: () => {
      setEmail('');
      void client.invalidateQueries({ queryKey: ['contacts', projectId] });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate();
  };
  return (
    <details className="card">
      <summary>Add a contact</summary>
      <form onSubmit={submit} noValidate className="add-contact">
        <TextField label="Email" type="email" required value={email} onChange={(e) => setEmail(e.target.value)} error={fieldError(add.error, 'email')} />
        <div className="field">
          <label>
            <input type="checkbox" checked={subscribed} onChange={(e) => setSubscribed(e.target.checked)} /> Subscribed to marketing email
          </label>
        </div>
        <ErrorNotice error={add.error && !fieldError(add.error, 'email') ? add.error : null} />
        {add.data ? (
          <p className="notice notice-ok" role="status">
            {add.data._meta.isNew ? 'Added' : 'Updated'}{' '}
            <Link to={`/p/${projectId}/contacts/${add.data.id}`}>{add.data.email}</Link>.
          </p>
        ) : null}
        <button type="submit" className="button-primary" disabled={add.isPending}>
          {add.isPending ? 'Adding…' : 'Add contact'}
        </button>
      </form>
    </details>
  );
}
