import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, lazy, Suspense, useId, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, ApiError } from '../../api/client';
import { useMe } from '../../api/session';
import type { Template as TemplateDto, TemplateType } from '../../api/templates';
import { useProject } from '../../app/project';
import { ContactPicker, type ContactRef } from '../../components/ContactPicker';
import { SenderHint } from '../../components/SenderHint';
import { ErrorNotice, fieldError, Loading, PageHeader, SelectField, TextField } from '../../components/ui';
import { useDebounced } from '../../components/useDebounced';
import type { TemplatePreview, TestSendResult } from './model';
import './templates.css';

// CodeMirror is a chunk of its own, fetched when an editor opens; a plain text area stands in until then.
const CodeEditor = lazy(() => import('./CodeEditor'));

interface Draft {
  name: string;
  description: string;
  subject: string;
  body: string;
  from: string;
  fromName: string;
  replyTo: string;
  type: TemplateType;
}

const STARTER: Draft = {
  name: '',
  description: '',
  subject: 'Hello {{name ?? "there"}}',
  body: '<p>Hi {{name ?? "there"}},</p>\n\n<p>…</p>\n',
  from: '',
  fromName: '',
  replyTo: '',
  type: 'TRANSACTIONAL',
};

const draftOf = (t: TemplateDto): Draft => ({
  name: t.name,
  description: t.description ?? '',
  subject: t.subject,
  body: t.body,
  from: t.from ?? '',
  fromName: t.fromName ?? '',
  replyTo: t.replyTo ?? '',
  type: t.type,
});

/** A field as it is saved: the service trims everything but the subject and the body. */
const normalized = (draft: Draft, key: keyof Draft) => (key === 'body' || key === 'subject' ? draft[key] : draft[key].trim());

/** The API's body for the fields that differ from `saved` (all of them for a new template); empty optional fields are null. */
function changes(draft: Draft, saved: Draft | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(draft) as (keyof Draft)[]) {
    const value = normalized(draft, key);
    if (saved && value === normalized(saved, key)) continue;
    const optional = key === 'description' || key === 'from' || key === 'fromName' || key === 'replyTo';
    // A new template leaves an empty optional field out; an existing one clears it.
    out[key] = optional && value === '' ? (saved ? null : undefined) : value;
  }
  return out;
}

export default function Template() {
  const { projectId } = useProject();
  const { templateId = 'new' } = useParams();
  const isNew = templateId === 'new';
  const template = useQuery({
    queryKey: ['template', projectId, templateId],
    queryFn: () => api<TemplateDto>(`/templates/${templateId}`),
    enabled: !isNew,
  });
  if (!isNew && template.isPending) return <Loading />;
  if (!isNew && template.error) {
    return (
      <>
        <PageHeader title="Template" />
        <ErrorNotice error={template.error} />
        <p>
          <Link to={`/p/${projectId}/templates`}>Back to templates</Link>
        </p>
      </>
    );
  }
  // Keyed by id, so opening another template (or the one just created) starts from its saved state.
  return <Editor key={templateId} projectId={projectId} saved={isNew ? null : template.data!} />;
}

function Editor({ projectId, saved }: { projectId: string; saved: TemplateDto | null }) {
  const client = useQueryClient();
  const navigate = useNavigate();
  const [base, setBase] = useState<Draft | null>(saved ? draftOf(saved) : null);
  const [draft, setDraft] = useState<Draft>(saved ? draftOf(saved) : STARTER);
  const [justSaved, setJustSaved] = useState(false);
  const set = <K extends keyof Draft>(key: K, value: Draft[K]) => {
    setJustSaved(false);
    setDraft((d) => ({ ...d, [key]: value }));
  };
  const dirty = base === null || Object.keys(changes(draft, base)).length > 0;
  const bodyLabel = useId();
  const bodyHint = useId();

  const save = useMutation({
    mutationFn: () =>
      saved
        ? api<TemplateDto>(`/templates/${saved.id}`, { method: 'PATCH', body: changes(draft, base) })
        : api<TemplateDto>('/templates', { method: 'POST', body: changes(draft, null) }),
    onSuccess: async (result) => {
      client.setQueryData(['template', projectId, result.id], result);
      await client.invalidateQueries({ queryKey: ['templates', projectId] });
      if (!saved) {
        navigate(`/p/${projectId}/templates/${result.id}`, { replace: true });
        return;
      }
      setBase(draftOf(result));
      setJustSaved(true);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  // The sender's domain is refused as a whole (403), not as a field: shown under the field all the same.
  const fromError =
    fieldError(save.error, 'from') ?? (save.error instanceof ApiError && save.error.code === 'DOMAIN_NOT_VERIFIED' ? save.error.message : undefined);

  return (
    <>
      <PageHeader title={saved ? saved.name : 'New template'} description={<Link to={`/p/${projectId}/templates`}>← All templates</Link>}>
        <span className="muted" role="status">
          {save.isPending ? 'Saving…' : justSaved && !dirty ? 'Saved' : dirty && saved ? 'Unsaved changes' : ''}
        </span>
        <button type="submit" form="template-form" className="button-primary" disabled={save.isPending || (!dirty && !!saved)}>
          {saved ? 'Save' : 'Create template'}
        </button>
      </PageHeader>
      <div className="template-layout">
        <form id="template-form" className="template-form" onSubmit={submit} noValidate>
          <ErrorNotice error={save.error} />
          <div className="card">
            <div className="template-fields">
              <TextField label="Name" required value={draft.name} onChange={(e) => set('name', e.target.value)} error={fieldError(save.error, 'name')} />
              <SelectField label="Type" value={draft.type} onChange={(e) => set('type', e.target.value as TemplateType)} hint="Marketing mail gets an unsubscribe footer and headers.">
                <option value="TRANSACTIONAL">Transactional</option>
                <option value="MARKETING">Marketing</option>
              </SelectField>
            </div>
            <TextField label="Subject" required value={draft.subject} onChange={(e) => set('subject', e.target.value)} error={fieldError(save.error, 'subject')} />
            <div className="template-fields">
              <TextField
                label="From address"
                type="email"
                autoComplete="off"
                placeholder="hello@yourdomain.com"
                value={draft.from}
                onChange={(e) => set('from', e.target.value)}
                error={fromError}
                hint={<SenderHint projectId={projectId} />}
              />
              <TextField label="From name" autoComplete="off" value={draft.fromName} onChange={(e) => set('fromName', e.target.value)} error={fieldError(save.error, 'fromName')} />
            </div>
            <TextField label="Reply-to" type="email" autoComplete="off" value={draft.replyTo} onChange={(e) => set('replyTo', e.target.value)} error={fieldError(save.error, 'replyTo')} />
            <TextField label="Description" autoComplete="off" value={draft.description} onChange={(e) => set('description', e.target.value)} error={fieldError(save.error, 'description')} />
            <div className="field">
              <span id={bodyLabel} className="label">
                Body (HTML)
              </span>
              <Suspense fallback={<textarea aria-labelledby={bodyLabel} className="code-fallback" value={draft.body} onChange={(e) => set('body', e.target.value)} />}>
                <CodeEditor value={draft.body} onChange={(value) => set('body', value)} labelId={bodyLabel} describedBy={bodyHint} />
              </Suspense>
              <p id={bodyHint} className={fieldError(save.error, 'body') ? 'field-error' : 'muted'}>
                {fieldError(save.error, 'body') ?? (
                  <>
                    Variables: <code>{'{{name}}'}</code>, <code>{'{{data.plan}}'}</code>, with a fallback <code>{'{{name ?? "there"}}'}</code>. Tab moves on to the next field.
                  </>
                )}
              </p>
            </div>
          </div>
        </form>
        <aside className="template-side" aria-label="Preview and test">
          <Preview projectId={projectId} draft={draft} />
          <TestSend projectId={projectId} saved={saved} dirty={dirty} />
        </aside>
      </div>
    </>
  );
}

/** The service renders the draft for a chosen contact as it would send it; shown in a sandbox that runs nothing. */
function Preview({ projectId, draft }: { projectId: string; draft: Draft }) {
  const [contact, setContact] = useState<ContactRef | null>(null);
  // Compared as text: a new object each render would restart the wait for ever.
  const settled = useDebounced(JSON.stringify({ subject: draft.subject, body: draft.body, type: draft.type, contactId: contact?.id }), 400);
  const input = JSON.parse(settled) as { subject: string; body: string; type: TemplateType; contactId?: string };
  const preview = useQuery({
    queryKey: ['template-preview', projectId, input],
    queryFn: ({ signal }) => api<TemplatePreview>('/templates/preview', { method: 'POST', body: input, signal }),
    placeholderData: keepPreviousData,
    retry: false,
  });
  const shown = preview.data;
  return (
    <section className="card" aria-labelledby="preview-title">
      <h2 id="preview-title">Preview</h2>
      <ContactPicker
        label="Preview as contact"
        value={contact}
        onChange={setContact}
        chosenPrefix="Rendered for"
        none="Rendered for a stand-in contact with no data."
        clearLabel="Use no contact"
      />
      {preview.error ? <ErrorNotice error={preview.error} /> : null}
      {shown ? (
        <>
          <p className="preview-subject">
            <span className="muted">Subject:</span> <strong data-testid="preview-subject">{shown.subject || '(empty)'}</strong>
          </p>
          <iframe className="preview-frame" title="Email preview" sandbox="" srcDoc={shown.html} />
          <h3>Variables</h3>
          {shown.variables.length === 0 ? (
            <p className="muted">The template uses no variables.</p>
          ) : (
            <ul className="variable-list" aria-label="Variables the template uses">
              {shown.variables.map((v) => (
                <li key={v.name}>
                  <code>{v.name}</code>{' '}
                  {shown.contact || v.present ? (
                    <span className={v.present ? 'badge badge-ok' : 'badge badge-danger'}>{v.present ? (shown.contact ? 'has a value' : 'built in') : 'missing'}</span>
                  ) : (
                    <span className="badge">from the contact</span>
                  )}
                </li>
              ))}
            </ul>
          )}
        </>
      ) : preview.isPending ? (
        <Loading label="Rendering…" />
      ) : null}
    </section>
  );
}

/** Sends the saved template to an address, as /v1/send would. */
function TestSend({ projectId, saved, dirty }: { projectId: string; saved: TemplateDto | null; dirty: boolean }) {
  const me = useMe();
  const [email, setEmail] = useState('');
  const address = email || me.data?.email || '';
  const send = useMutation({
    mutationFn: () => api<TestSendResult>(`/templates/${saved!.id}/test`, { method: 'POST', body: { email: address } }),
  });
  return (
    <section className="card" aria-labelledby="test-title">
      <h2 id="test-title">Send a test</h2>
      {saved ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            send.mutate();
          }}
          noValidate
        >
          <TextField
            label="Send to"
            type="email"
            autoComplete="email"
            value={address}
            onChange={(e) => setEmail(e.target.value)}
            error={fieldError(send.error, 'email')}
            hint={dirty ? 'Sends the saved version: save your changes first to test them.' : 'Rendered for the contact of this address, if there is one.'}
          />
          <ErrorNotice error={send.error && !fieldError(send.error, 'email') ? send.error : null} />
          {send.data ? (
            <p role="status" className="notice notice-ok">
              Queued to {send.data.email}.
              {send.data.outbox ? (
                <>
                  {' '}
                  Outbox mode: read it in the <Link to={`/p/${projectId}/outbox`}>outbox</Link>.
                </>
              ) : null}
            </p>
          ) : null}
          <button type="submit" disabled={send.isPending || !address}>
            {send.isPending ? 'Sending…' : 'Send test'}
          </button>
        </form>
      ) : (
        <p className="muted">Create the template first; then a test can be sent.</p>
      )}
    </section>
  );
}
