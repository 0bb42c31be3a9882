import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useId, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, ApiError } from '../../api/client';
import type { Contact as ContactDto } from '../../api/contacts';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, fieldError, Loading, PageHeader, TextArea, TextField } from '../../components/ui';
import { SubscriptionBadge } from './SubscriptionBadge';
import './contacts.css';

/** Keys the service drops from `data` (db/contacts/data.ts RESERVED_DATA_KEYS). */
const RESERVED_DATA_KEYS = new Set(['id', 'svc_id', 'svc_email', 'email', 'unsubscribeUrl', 'subscribeUrl', 'manageUrl', 'subscribed', 'createdAt', 'updatedAt']);

interface EventRow {
  id: string;
  name: string;
  data: Record<string, unknown>;
  createdAt: string;
}

interface EmailSummary {
  id: string;
  status: string;
  source: string;
  to: string;
  subject: string;
  error: string | null;
  createdAt: string;
  sentAt: string | null;
}

interface EmailDetail extends EmailSummary {
  bouncedAt: string | null;
  bounceType: 'hard' | 'soft' | null;
  complainedAt: string | null;
  opens: { count: number; last: string | null };
  clicks: { count: number; last: string | null };
}

export default function Contact() {
  const { projectId } = useProject();
  const { contactId = '' } = useParams();
  const navigate = useNavigate();
  const client = useQueryClient();
  const key = ['contacts', projectId, 'one', contactId];
  const contact = useQuery({ queryKey: key, queryFn: () => api<ContactDto>(`/contacts/${encodeURIComponent(contactId)}`) });
  const save = (next: ContactDto) => {
    client.setQueryData(key, next);
    void client.invalidateQueries({ queryKey: ['contacts', projectId, 'list'] });
    // A change of subscription is recorded as an event.
    void client.invalidateQueries({ queryKey: ['contacts', projectId, 'events', contactId] });
  };
  const remove = useMutation({
    mutationFn: () => api(`/contacts/${encodeURIComponent(contactId)}`, { method: 'DELETE' }),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['contacts', projectId] });
      navigate(`/p/${projectId}/contacts`);
    },
  });

  const back = (
    <p>
      <Link to={`/p/${projectId}/contacts`}>← All contacts</Link>
    </p>
  );
  if (contact.isPending) return <Loading />;
  if (contact.error || !contact.data) {
    return (
      <>
        {back}
        <PageHeader title="Contact" />
        <ErrorNotice error={contact.error} />
      </>
    );
  }
  const c = contact.data;
  return (
    <>
      <title>{`${c.email} · Tidings`}</title>
      {back}
      <PageHeader title={c.email} description={`Added ${formatDate(c.createdAt)} · last changed ${formatDate(c.updatedAt)}`}>
        <ConfirmDialog
          trigger={
            <button type="button" className="button-danger">
              Delete contact…
            </button>
          }
          title={`Delete ${c.email}?`}
          description="The contact's events and segment memberships go with it, and journeys running for it stop. Emails already sent stay in the history. This cannot be undone."
          confirmLabel="Delete contact"
          pendingLabel="Deleting…"
          onConfirm={() => remove.mutateAsync()}
        />
      </PageHeader>

      <div className="grid-2">
        <Subscription contact={c} onSaved={save} />
        <EmailForm contact={c} onSaved={save} />
      </div>
      <DataEditor contact={c} onSaved={save} />
      <Events contact={c} />
      <Emails projectId={projectId} contactId={c.id} />
    </>
  );
}

function Subscription({ contact, onSaved }: { contact: ContactDto; onSaved: (c: ContactDto) => void }) {
  const toggle = useMutation({
    mutationFn: () => api<ContactDto>(`/contacts/${contact.id}`, { method: 'PATCH', body: { subscribed: !contact.subscribed } }),
    onSuccess: onSaved,
  });
  return (
    <section className="card" aria-labelledby="subscription-heading">
      <h2 id="subscription-heading">Subscription</h2>
      <p role="status">
        <SubscriptionBadge subscribed={contact.subscribed} />{' '}
        {contact.subscribed ? 'Receives campaigns and marketing journeys.' : 'Receives transactional email only.'}
      </p>
      <ErrorNotice error={toggle.error} />
      <button type="button" onClick={() => toggle.mutate()} disabled={toggle.isPending}>
        {contact.subscribed ? 'Unsubscribe' : 'Subscribe'}
      </button>
    </section>
  );
}

function EmailForm({ contact, onSaved }: { contact: ContactDto; onSaved: (c: ContactDto) => void }) {
  const [email, setEmail] = useState(contact.email);
  const change = useMutation({
    mutationFn: () => api<ContactDto>(`/contacts/${contact.id}`, { method: 'PATCH', body: { email } }),
    onSuccess: (next) => {
      setEmail(next.email);
      onSaved(next);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    change.mutate();
  };
  const emailError = fieldError(change.error, 'email');
  return (
    <section className="card" aria-labelledby="email-heading">
      <h2 id="email-heading">Email address</h2>
      <form onSubmit={submit} noValidate>
        <TextField label="Email" type="email" value={email} onChange={(e) => setEmail(e.target.value)} error={emailError} required />
        <ErrorNotice error={emailError ? null : change.error} />
        <button type="submit" disabled={change.isPending || email.trim().toLowerCase() === contact.email}>
          {change.isPending ? 'Saving…' : 'Change email'}
        </button>
      </form>
    </section>
  );
}

// ---- Custom data: key/value rows, saved as a patch --------------------------------------------------

type ValueType = 'text' | 'number' | 'boolean' | 'json';

interface Row {
  /** Stable React key; a row's data key may be edited. */
  uid: number;
  key: string;
  type: ValueType;
  value: string;
}

let nextUid = 1;

function toRow(key: string, value: unknown): Row {
  const uid = nextUid++;
  if (typeof value === 'string') return { uid, key, type: 'text', value };
  if (typeof value === 'number') return { uid, key, type: 'number', value: String(value) };
  if (typeof value === 'boolean') return { uid, key, type: 'boolean', value: String(value) };
  return { uid, key, type: 'json', value: JSON.stringify(value) };
}

/** The row's value as JSON, or why it cannot be sent. */
function parseRow(row: Row): { value: unknown } | { error: string } {
  switch (row.type) {
    case 'text':
      return row.value === '' ? { error: 'An empty value is not stored: remove the field instead' } : { value: row.value };
    case 'number': {
      const n = Number(row.value.trim());
      return row.value.trim() === '' || !Number.isFinite(n) ? { error: 'Enter a number, e.g. 42 or 3.5' } : { value: n };
    }
    case 'boolean':
      return { value: row.value === 'true' };
    case 'json':
      try {
        const parsed: unknown = JSON.parse(row.value);
        return parsed === null ? { error: 'null removes a field: remove the row instead' } : { value: parsed };
      } catch {
        return { error: 'Not valid JSON, e.g. ["a", "b"] or {"city": "Lyon"}' };
      }
  }
}

/** What each row would send, and the problems to fix first, by row. */
function plan(original: Record<string, unknown>, rows: Row[]): { patch: Record<string, unknown>; errors: Map<number, { key?: string; value?: string }> } {
  const errors = new Map<number, { key?: string; value?: string }>();
  const patch: Record<string, unknown> = {};
  const seen = new Set<string>();
  for (const row of rows) {
    const key = row.key.trim();
    const problems: { key?: string; value?: string } = {};
    if (key === '') problems.key = 'Name the field';
    else if (key.length > 255) problems.key = 'At most 255 characters';
    else if (RESERVED_DATA_KEYS.has(key)) problems.key = `"${key}" is reserved and would be dropped`;
    else if (seen.has(key)) problems.key = 'Another row has this name';
    seen.add(key);
    const parsed = parseRow(row);
    if ('error' in parsed) problems.value = parsed.error;
    if (problems.key || problems.value) {
      errors.set(row.uid, problems);
      continue;
    }
    const value = (parsed as { value: unknown }).value;
    if (!(key in original) || JSON.stringify(original[key]) !== JSON.stringify(value)) patch[key] = value;
  }
  // PATCH semantics: null removes a key; keys left alone are not sent.
  for (const key of Object.keys(original)) if (!seen.has(key)) patch[key] = null;
  return { patch, errors };
}

function DataEditor({ contact, onSaved }: { contact: ContactDto; onSaved: (c: ContactDto) => void }) {
  const rowsOf = (data: Record<string, unknown>) => Object.entries(data).map(([k, v]) => toRow(k, v));
  // The rows are edits of `base`, the data as it was when editing started: the patch says what the
  // user changed, so keys written meanwhile elsewhere (a tracked event's data) are left alone.
  const [base, setBase] = useState(contact.data);
  const [rows, setRows] = useState<Row[]>(() => rowsOf(contact.data));
  const [showErrors, setShowErrors] = useState(false);
  const [saved, setSaved] = useState(false);
  const { patch, errors } = plan(base, rows);
  const dirty = Object.keys(patch).length > 0 || errors.size > 0;
  // Newer data from the service replaces the rows unless the user is in the middle of editing them.
  const latest = JSON.stringify(contact.data);
  const [seen, setSeen] = useState(latest);
  if (seen !== latest) {
    setSeen(latest);
    if (!dirty) {
      setBase(contact.data);
      setRows(rowsOf(contact.data));
    }
  }
  const save = useMutation({
    mutationFn: () => api<ContactDto>(`/contacts/${contact.id}`, { method: 'PATCH', body: { data: patch } }),
    onSuccess: (next) => {
      setBase(next.data);
      setRows(rowsOf(next.data));
      setSeen(JSON.stringify(next.data));
      setShowErrors(false);
      setSaved(true);
      onSaved(next);
    },
  });
  const update = (uid: number, change: Partial<Row>) => {
    setSaved(false);
    setRows((rs) => rs.map((r) => (r.uid === uid ? { ...r, ...change } : r)));
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setShowErrors(true);
    if (errors.size === 0 && Object.keys(patch).length > 0) save.mutate();
  };
  return (
    <section className="card" aria-labelledby="data-heading">
      <h2 id="data-heading">Data</h2>
      <p className="muted">Custom fields, usable in templates and segments. A field's type is fixed the first time it is used in the project.</p>
      <form onSubmit={submit} noValidate>
        {rows.length === 0 ? <p className="muted">No data yet.</p> : null}
        <div className="data-rows">
          {rows.map((row, i) => (
            <DataRow
              key={row.uid}
              row={row}
              index={i + 1}
              errors={showErrors ? errors.get(row.uid) : undefined}
              serverError={fieldError(save.error, `data.${row.key.trim()}`)}
              onChange={(change) => update(row.uid, change)}
              onRemove={() => {
                setSaved(false);
                setRows((rs) => rs.filter((r) => r.uid !== row.uid));
              }}
            />
          ))}
        </div>
        {showErrors && errors.size > 0 ? (
          <p role="alert" className="field-error">
            Fix the fields marked above before saving.
          </p>
        ) : null}
        <ErrorNotice error={save.error} />
        {saved && !dirty ? (
          <p role="status" className="notice notice-ok">
            Data saved.
          </p>
        ) : null}
        <div className="actions">
          <button type="button" onClick={() => setRows((rs) => [...rs, { uid: nextUid++, key: '', type: 'text', value: '' }])}>
            Add field
          </button>
          <button type="submit" className="button-primary" disabled={save.isPending || !dirty}>
            {save.isPending ? 'Saving…' : 'Save data'}
          </button>
          <button
            type="button"
            disabled={!dirty}
            onClick={() => {
              setBase(contact.data);
              setRows(rowsOf(contact.data));
              setShowErrors(false);
              save.reset();
            }}
          >
            Discard changes
          </button>
        </div>
      </form>
    </section>
  );
}

function DataRow({
  row,
  index,
  errors,
  serverError,
  onChange,
  onRemove,
}: {
  row: Row;
  index: number;
  errors?: { key?: string; value?: string };
  serverError?: string;
  onChange: (change: Partial<Row>) => void;
  onRemove: () => void;
}) {
  const typeId = useId();
  const name = row.key.trim() || `field ${index}`;
  return (
    <div className="data-row" role="group" aria-label={`Field ${index}`}>
      <TextField label="Name" value={row.key} onChange={(e) => onChange({ key: e.target.value })} error={errors?.key} spellCheck={false} />
      <div className="field">
        <label htmlFor={typeId}>Type</label>
        <select
          id={typeId}
          value={row.type}
          onChange={(e) => {
            const type = e.target.value as ValueType;
            onChange({ type, value: type === 'boolean' ? (row.value === 'false' ? 'false' : 'true') : row.value });
          }}
        >
          <option value="text">Text</option>
          <option value="number">Number</option>
          <option value="boolean">Yes / no</option>
          <option value="json">JSON</option>
        </select>
      </div>
      {row.type === 'boolean' ? (
        <div className="field">
          <label htmlFor={`${typeId}-v`}>Value</label>
          <select id={`${typeId}-v`} value={row.value} onChange={(e) => onChange({ value: e.target.value })}>
            <option value="true">true</option>
            <option value="false">false</option>
          </select>
        </div>
      ) : (
        <TextField
          label="Value"
          value={row.value}
          inputMode={row.type === 'number' ? 'decimal' : undefined}
          onChange={(e) => onChange({ value: e.target.value })}
          error={errors?.value ?? serverError}
          spellCheck={row.type === 'text'}
        />
      )}
      <button type="button" className="button-small row-remove" onClick={onRemove} aria-label={`Remove ${name}`}>
        Remove
      </button>
    </div>
  );
}

// ---- Events ------------------------------------------------------------------------------------------

function Events({ contact }: { contact: ContactDto }) {
  const { projectId } = useProject();
  const client = useQueryClient();
  const events = useCursorList<EventRow>(['contacts', projectId, 'events', contact.id], `/events/contact/${encodeURIComponent(contact.id)}`, { limit: 10 });
  const [name, setName] = useState('');
  const [data, setData] = useState('');
  const [dataError, setDataError] = useState<string | undefined>();
  const track = useMutation({
    mutationFn: (body: { email: string; event: string; data?: unknown }) => api('/events/track', { method: 'POST', body }),
    onSuccess: () => {
      setName('');
      setData('');
      events.reset();
      void client.invalidateQueries({ queryKey: ['contacts', projectId, 'events', contact.id] });
      void client.invalidateQueries({ queryKey: ['contacts', projectId, 'one', contact.id] });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    let parsed: unknown;
    if (data.trim() !== '') {
      try {
        parsed = JSON.parse(data);
      } catch {
        setDataError('Not valid JSON');
        return;
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        setDataError('An object, e.g. {"plan": "pro"}');
        return;
      }
    }
    setDataError(undefined);
    track.mutate({ email: contact.email, event: name.trim(), ...(parsed === undefined ? {} : { data: parsed }) });
  };
  return (
    <section className="card" aria-labelledby="events-heading">
      <h2 id="events-heading">Events</h2>
      <ErrorNotice error={events.error} />
      {events.isPending ? (
        <Loading />
      ) : events.data && events.data.data.length === 0 ? (
        <EmptyState>No events yet.</EmptyState>
      ) : events.data ? (
        <>
          <ol className="timeline" aria-label="Events, newest first">
            {events.data.data.map((e) => (
              <li key={e.id}>
                <span className="event-name">{e.name}</span>
                <time className="muted" dateTime={e.createdAt}>
                  {formatDate(e.createdAt)}
                </time>
                {Object.keys(e.data).length ? <code>{JSON.stringify(e.data)}</code> : null}
              </li>
            ))}
          </ol>
          {events.hasNext || events.hasPrevious ? <CursorPager list={events} label="Events" /> : null}
        </>
      ) : null}

      <details className="track-event">
        <summary>Track an event for this contact</summary>
        <form onSubmit={submit} noValidate>
          <TextField
            label="Event name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            required
            hint="Starts the journeys it triggers, like an event your app sends"
            error={fieldError(track.error, 'event')}
          />
          <TextArea
            label="Event data (JSON, optional)"
            value={data}
            onChange={(e) => setData(e.target.value)}
            rows={3}
            placeholder='{"plan": "pro"}'
            error={dataError ?? fieldError(track.error, 'data')}
            spellCheck={false}
          />
          <ErrorNotice error={track.error instanceof ApiError && track.error.fields.length ? null : track.error} />
          {track.isSuccess ? (
            <p role="status" className="notice notice-ok">
              Event tracked.
            </p>
          ) : null}
          <button type="submit" disabled={track.isPending}>
            {track.isPending ? 'Tracking…' : 'Track event'}
          </button>
        </form>
      </details>
    </section>
  );
}

// ---- Emails ------------------------------------------------------------------------------------------

function Emails({ projectId, contactId }: { projectId: string; contactId: string }) {
  const emails = useCursorList<EmailSummary>(['contacts', projectId, 'emails', contactId], '/emails', { contactId, limit: 10 });
  // Opens, clicks and bounces are on each email's detail; a page holds at most ten.
  const details = useQueries({
    queries: (emails.data?.data ?? []).map((e) => ({
      queryKey: ['emails', projectId, e.id],
      queryFn: () => api<EmailDetail>(`/emails/${e.id}`),
    })),
  });
  const detail = new Map(details.flatMap((d) => (d.data ? [[d.data.id, d.data] as const] : [])));
  return (
    <section className="card" aria-labelledby="emails-heading">
      <h2 id="emails-heading">Emails sent</h2>
      <ErrorNotice error={emails.error} />
      {emails.isPending ? (
        <Loading />
      ) : emails.data && emails.data.data.length === 0 ? (
        <EmptyState>No email has been sent to this contact.</EmptyState>
      ) : emails.data ? (
        <>
          <TableScroll label="Emails sent to this contact">
            <table>
              <caption className="visually-hidden">Emails sent to this contact</caption>
              <thead>
                <tr>
                  <th scope="col">Subject</th>
                  <th scope="col">Status</th>
                  <th scope="col" className="nowrap">
                    Sent
                  </th>
                  <th scope="col">Opens</th>
                  <th scope="col">Clicks</th>
                  <th scope="col">Bounce</th>
                </tr>
              </thead>
              <tbody>
                {emails.data.data.map((e) => {
                  const d = detail.get(e.id);
                  return (
                    <tr key={e.id}>
                      <td>
                        {e.subject || <span className="muted">(no subject)</span>}
                        <div className="muted">{e.source.toLowerCase()}</div>
                      </td>
                      <td>
                        <span className={statusClass(e.status)}>{e.status.toLowerCase()}</span>
                        {e.error ? <div className="muted">{e.error}</div> : null}
                      </td>
                      <td className="nowrap">{formatDate(e.sentAt ?? e.createdAt)}</td>
                      <td>{d ? d.opens.count : '…'}</td>
                      <td>{d ? d.clicks.count : '…'}</td>
                      <td>{d ? (d.bouncedAt ? `${d.bounceType ?? ''} ${formatDate(d.bouncedAt)}`.trim() : d.complainedAt ? `complaint ${formatDate(d.complainedAt)}` : '—') : '…'}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </TableScroll>
          {emails.hasNext || emails.hasPrevious ? <CursorPager list={emails} label="Emails" /> : null}
        </>
      ) : null}
    </section>
  );
}

function statusClass(status: string): string {
  if (status === 'BOUNCED' || status === 'FAILED' || status === 'COMPLAINED') return 'badge badge-danger';
  if (status === 'DELIVERED' || status === 'OPENED' || status === 'CLICKED' || status === 'SENT') return 'badge badge-ok';
  return 'badge';
}
