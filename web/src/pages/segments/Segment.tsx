import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../api/client';
import type { Contact } from '../../api/contacts';
import type { MembersPage, Segment as SegmentDto, SegmentType } from '../../api/segments';
import { useProject } from '../../app/project';
import { type Condition, ConditionBuilder, emptyCondition, isCompleteCondition } from '../../components/ConditionBuilder';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { ErrorNotice, fieldError, Loading, PageHeader, TextArea, TextField } from '../../components/ui';
import { useDebounced } from '../../components/useDebounced';
import { type SegmentPreview, TYPE_LABELS } from './model';
import './segments.css';

/** JSON text with keys in order: the service stores conditions as jsonb, which reorders keys. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

export default function Segment() {
  const { projectId } = useProject();
  const { segmentId = 'new' } = useParams();
  const isNew = segmentId === 'new';
  const segment = useQuery({
    queryKey: ['segment', projectId, segmentId],
    queryFn: () => api<SegmentDto>(`/segments/${segmentId}`),
    enabled: !isNew,
  });
  if (!isNew && segment.isPending) return <Loading />;
  if (!isNew && segment.error) {
    return (
      <>
        <PageHeader title="Segment" />
        <ErrorNotice error={segment.error} />
        <p>
          <Link to={`/p/${projectId}/segments`}>Back to segments</Link>
        </p>
      </>
    );
  }
  return <Editor key={segmentId} projectId={projectId} saved={isNew ? null : segment.data!} />;
}

function Editor({ projectId, saved }: { projectId: string; saved: SegmentDto | null }) {
  const client = useQueryClient();
  const navigate = useNavigate();
  const [name, setName] = useState(saved?.name ?? '');
  const [description, setDescription] = useState(saved?.description ?? '');
  const [type, setType] = useState<SegmentType>(saved?.type ?? 'DYNAMIC');
  const [condition, setCondition] = useState<Condition>(saved?.condition ?? emptyCondition('segment'));
  const [trackMembership, setTrackMembership] = useState(saved?.trackMembership ?? false);
  const complete = isCompleteCondition(condition);
  const dynamic = type === 'DYNAMIC';

  const conditionChanged = !saved || canonical(condition) !== canonical(saved.condition);
  const dirty =
    !saved ||
    name !== saved.name ||
    description !== (saved.description ?? '') ||
    trackMembership !== saved.trackMembership ||
    (saved.type === 'DYNAMIC' && conditionChanged);

  const save = useMutation({
    mutationFn: () => {
      const desc = description.trim() === '' ? null : description;
      if (!saved) {
        return api<SegmentDto>('/segments', {
          method: 'POST',
          body: { name, description: desc, type, trackMembership, ...(dynamic ? { condition } : {}) },
        });
      }
      const patch: Record<string, unknown> = {};
      if (name !== saved.name) patch.name = name;
      if (description !== (saved.description ?? '')) patch.description = desc;
      if (trackMembership !== saved.trackMembership) patch.trackMembership = trackMembership;
      if (saved.type === 'DYNAMIC' && conditionChanged) patch.condition = condition;
      return api<SegmentDto>(`/segments/${saved.id}`, { method: 'PATCH', body: patch });
    },
    onSuccess: async (result) => {
      client.setQueryData(['segment', projectId, result.id], result);
      await client.invalidateQueries({ queryKey: ['segments', projectId] });
      await client.invalidateQueries({ queryKey: ['segment-members', projectId, result.id] });
      if (!saved) navigate(`/p/${projectId}/segments/${result.id}`, { replace: true });
    },
  });

  const remove = useMutation({
    mutationFn: () => api(`/segments/${saved!.id}`, { method: 'DELETE' }),
    onSuccess: async () => {
      await client.invalidateQueries({ queryKey: ['segments', projectId] });
      navigate(`/p/${projectId}/segments`, { replace: true });
    },
  });

  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };

  return (
    <>
      <PageHeader title={saved ? saved.name : 'New segment'} description={<Link to={`/p/${projectId}/segments`}>← All segments</Link>}>
        <span className="muted" role="status">
          {save.isPending ? 'Saving…' : save.isSuccess && !dirty ? 'Saved' : dirty && saved ? 'Unsaved changes' : ''}
        </span>
        <button type="submit" form="segment-form" className="button-primary" disabled={save.isPending || (!!saved && !dirty)}>
          {saved ? 'Save' : 'Create segment'}
        </button>
        {saved ? (
          <ConfirmDialog
            trigger={
              <button type="button" className="button-danger">
                Delete
              </button>
            }
            title={`Delete “${saved.name}”?`}
            description="Its contacts stay. A segment used by a scheduled or sending campaign cannot be deleted. This cannot be undone."
            confirmLabel="Delete"
            pendingLabel="Deleting…"
            cancelLabel="Keep it"
            onConfirm={() => remove.mutateAsync()}
          />
        ) : null}
      </PageHeader>
      <form id="segment-form" onSubmit={submit} noValidate>
        <ErrorNotice error={save.error} />
        <div className="card">
          <div className="segment-fields">
            <TextField label="Name" required value={name} onChange={(e) => setName(e.target.value)} error={fieldError(save.error, 'name')} />
            {saved ? (
              <div className="field">
                <span className="label">Type</span>
                <span>
                  <span className="badge">{TYPE_LABELS[saved.type]}</span>
                </span>
              </div>
            ) : (
              <fieldset className="field segment-type">
                <legend className="label">Type</legend>
                <label>
                  <input type="radio" name="segment-type" value="DYNAMIC" checked={type === 'DYNAMIC'} onChange={() => setType('DYNAMIC')} /> Dynamic: contacts matching a
                  condition
                </label>
                <label>
                  <input type="radio" name="segment-type" value="STATIC" checked={type === 'STATIC'} onChange={() => setType('STATIC')} /> Static: a list you add contacts to
                </label>
              </fieldset>
            )}
          </div>
          <TextArea label="Description" rows={2} value={description} onChange={(e) => setDescription(e.target.value)} error={fieldError(save.error, 'description')} />
          {dynamic ? (
            <label className="segment-checkbox">
              <input type="checkbox" checked={trackMembership} onChange={(e) => setTrackMembership(e.target.checked)} /> Track who enters and leaves (segment entry and exit
              events, which can start journeys)
            </label>
          ) : null}
        </div>
        {dynamic ? (
          <div className="segment-condition">
            <div>
              <ConditionBuilder value={condition} onChange={(next) => setCondition(next)} excludeSegmentId={saved?.id} />
              {fieldError(save.error, 'condition') ? <p className="field-error">{fieldError(save.error, 'condition')}</p> : null}
            </div>
            <LivePreview projectId={projectId} condition={condition} complete={complete} segmentId={saved?.id} />
          </div>
        ) : null}
      </form>
      {saved ? <Members projectId={projectId} segment={saved} /> : null}
    </>
  );
}

/** How many contacts the condition matches now, and the newest of them, while it is edited. */
function LivePreview({ projectId, condition, complete, segmentId }: { projectId: string; condition: Condition; complete: boolean; segmentId?: string }) {
  const settled = useDebounced(complete ? JSON.stringify(condition) : '', 400);
  const preview = useQuery({
    queryKey: ['segment-preview', projectId, segmentId, settled],
    queryFn: ({ signal }) =>
      api<SegmentPreview>('/segments/preview', { method: 'POST', body: { condition: JSON.parse(settled) as Condition, limit: 5, segmentId }, signal }),
    enabled: settled !== '',
    placeholderData: keepPreviousData,
    retry: false,
  });
  const stale = !complete || settled !== JSON.stringify(condition) || preview.isFetching;
  return (
    <section className="card live-preview" aria-labelledby="live-preview-title">
      <h2 id="live-preview-title">Who matches now</h2>
      {!complete ? <p className="muted">Finish every filter (a field, and a value where it needs one) to see who matches.</p> : null}
      {complete && preview.error ? <ErrorNotice error={preview.error} /> : null}
      <div aria-live="polite" aria-busy={stale}>
        {preview.data && complete && !preview.error ? (
          <>
            <p className={stale ? 'match-count stale' : 'match-count'}>
              <strong data-testid="match-count">{preview.data.count.toLocaleString()}</strong> {preview.data.count === 1 ? 'contact matches' : 'contacts match'}
              {stale ? <span className="muted"> (counting…)</span> : null}
            </p>
            {preview.data.sample.length > 0 ? (
              <>
                <h3>Newest of them</h3>
                <ul className="sample-list" aria-label="Sample members">
                  {preview.data.sample.map((c) => (
                    <li key={c.id}>
                      <Link to={`/p/${projectId}/contacts/${c.id}`}>{c.email}</Link>
                      {!c.subscribed ? <span className="muted"> · unsubscribed</span> : null}
                    </li>
                  ))}
                </ul>
              </>
            ) : null}
          </>
        ) : complete && preview.isFetching ? (
          <Loading label="Counting…" />
        ) : null}
      </div>
    </section>
  );
}

const PAGE_SIZE = 20;

function Members({ projectId, segment }: { projectId: string; segment: SegmentDto }) {
  const client = useQueryClient();
  const [page, setPage] = useState(1);
  const members = useQuery({
    queryKey: ['segment-members', projectId, segment.id, page],
    queryFn: () => api<MembersPage>(`/segments/${segment.id}/contacts`, { query: { page, pageSize: PAGE_SIZE } }),
    placeholderData: keepPreviousData,
  });
  const refreshAll = async () => {
    await client.invalidateQueries({ queryKey: ['segment-members', projectId, segment.id] });
    await client.invalidateQueries({ queryKey: ['segment', projectId, segment.id] });
    await client.invalidateQueries({ queryKey: ['segments', projectId] });
  };
  const recount = useMutation({
    mutationFn: () => api<{ memberCount: number }>(`/segments/${segment.id}/refresh`, { method: 'POST' }),
    onSuccess: refreshAll,
  });
  const removeOne = useMutation({
    mutationFn: (email: string) => api<{ removed: number }>(`/segments/${segment.id}/members`, { method: 'DELETE', body: { emails: [email] } }),
    onSuccess: refreshAll,
  });
  const pages = members.data ? Math.max(1, Math.ceil(members.data.total / PAGE_SIZE)) : 1;
  const isStatic = segment.type === 'STATIC';

  return (
    <section aria-labelledby="members-title" className="segment-members">
      <div className="members-header">
        <h2 id="members-title">Members</h2>
        <p className="muted">
          {segment.memberCount.toLocaleString()} counted {formatDate(segment.memberCountUpdatedAt)}
          {isStatic ? '' : ', by the saved condition'}.{' '}
          <button type="button" className="button-small" onClick={() => recount.mutate()} disabled={recount.isPending}>
            {recount.isPending ? 'Counting…' : 'Count again'}
          </button>
        </p>
      </div>
      <ErrorNotice error={members.error ?? recount.error ?? removeOne.error} />
      {isStatic ? <AddMembers segmentId={segment.id} onDone={refreshAll} /> : null}
      {members.isPending ? (
        <Loading />
      ) : members.data && members.data.data.length === 0 ? (
        <p className="empty">{isStatic ? 'No members yet: add some by email above.' : 'No contact matches the saved condition.'}</p>
      ) : members.data ? (
        <>
          <TableScroll label="Members of the segment">
            <table>
              <caption className="visually-hidden">Members, page {page}</caption>
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Subscribed</th>
                  <th scope="col">Created</th>
                  {isStatic ? (
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  ) : null}
                </tr>
              </thead>
              <tbody>
                {members.data.data.map((c: Contact) => (
                  <tr key={c.id}>
                    <td>
                      <Link to={`/p/${projectId}/contacts/${c.id}`}>{c.email}</Link>
                    </td>
                    <td>{c.subscribed ? 'Yes' : 'No'}</td>
                    <td>{formatDate(c.createdAt)}</td>
                    {isStatic ? (
                      <td>
                        <button
                          type="button"
                          className="button-small button-danger"
                          aria-label={`Remove ${c.email} from the segment`}
                          onClick={() => removeOne.mutate(c.email)}
                          disabled={removeOne.isPending}
                        >
                          Remove
                        </button>
                      </td>
                    ) : null}
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          <nav className="pager" aria-label="Members pages">
            <button type="button" onClick={() => setPage((p) => p - 1)} disabled={page <= 1 || members.isFetching}>
              Previous
            </button>
            <span>
              Page {page} of {pages} · {members.data.total.toLocaleString()} in all
            </span>
            <button type="button" onClick={() => setPage((p) => p + 1)} disabled={page >= pages || members.isFetching}>
              Next
            </button>
          </nav>
        </>
      ) : null}
    </section>
  );
}

/** A static segment's members, added by email (one per line, or separated by commas or spaces). */
function AddMembers({ segmentId, onDone }: { segmentId: string; onDone: () => Promise<void> }) {
  const [text, setText] = useState('');
  const [createMissing, setCreateMissing] = useState(false);
  const emails = [...new Set(text.split(/[\s,;]+/).filter(Boolean))];
  const add = useMutation({
    mutationFn: () =>
      api<{ added: number; created: number; notFound: string[] }>(`/segments/${segmentId}/members`, { method: 'POST', body: { emails, createMissing } }),
    onSuccess: async () => {
      setText('');
      await onDone();
    },
  });
  return (
    <form
      className="card add-members"
      onSubmit={(e) => {
        e.preventDefault();
        add.mutate();
      }}
      noValidate
    >
      <TextArea
        label="Add members by email"
        rows={3}
        value={text}
        onChange={(e) => setText(e.target.value)}
        hint="One per line, or separated by commas."
        error={fieldError(add.error, 'emails')}
      />
      <label className="segment-checkbox">
        <input type="checkbox" checked={createMissing} onChange={(e) => setCreateMissing(e.target.checked)} /> Create contacts for addresses that are not contacts yet
      </label>
      <ErrorNotice error={add.error && !fieldError(add.error, 'emails') ? add.error : null} />
      {add.data ? (
        <p role="status" className={add.data.notFound.length ? 'notice' : 'notice notice-ok'}>
          Added {add.data.added}
          {add.data.created ? `, created ${add.data.created} contacts` : ''}.
          {add.data.notFound.length ? ` Not contacts (not added): ${add.data.notFound.join(', ')}.` : ''}
        </p>
      ) : null}
      <button type="submit" disabled={emails.length === 0 || add.isPending}>
        {add.isPending ? 'Adding…' : emails.length === 0 ? 'Add members' : `Add ${emails.length} ${emails.length === 1 ? 'member' : 'members'}`}
      </button>
    </form>
  );
}
