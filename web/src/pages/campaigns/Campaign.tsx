import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useId, useRef, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../api/client';
import { useSegments } from '../../api/segments';
import { useTemplateChoices } from '../../api/templates';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { formatDate, formatPercent, READER_TIME_ZONE } from '../../components/format';
import { SenderHint } from '../../components/SenderHint';
import { type Interval, EMAIL_METRICS, SeriesChart, type SeriesPoint } from '../../components/SeriesChart';
import { ErrorNotice, fieldError, Loading, PageHeader, ProgressBar, SelectField, TextArea, TextField } from '../../components/ui';
import { audienceName, type Campaign as CampaignDto, type CampaignType, StatusBadge } from './model';
import './campaigns.css';

/** What the compose form edits: the body of POST and PUT /campaigns. */
interface Draft {
  name: string;
  description: string;
  subject: string;
  body: string;
  from: string;
  fromName: string;
  replyTo: string;
  type: CampaignType;
  /** '' is everyone subscribed. */
  segmentId: string;
}

const BLANK: Draft = {
  name: '',
  description: '',
  subject: '',
  body: '',
  from: '',
  fromName: '',
  replyTo: '',
  type: 'MARKETING',
  segmentId: '',
};

const draftOf = (c: CampaignDto): Draft => ({
  name: c.name,
  description: c.description ?? '',
  subject: c.subject,
  body: c.body,
  from: c.from,
  fromName: c.fromName ?? '',
  replyTo: c.replyTo ?? '',
  type: c.type,
  segmentId: c.segmentId ?? '',
});

const bodyOf = (d: Draft) => ({
  name: d.name,
  description: d.description || null,
  subject: d.subject,
  body: d.body,
  from: d.from,
  fromName: d.fromName || null,
  replyTo: d.replyTo || null,
  type: d.type,
  segmentId: d.segmentId || null,
});

const sameDraft = (a: Draft, b: Draft) => (Object.keys(a) as (keyof Draft)[]).every((k) => a[k] === b[k]);

/** A datetime-local value (the reader's wall clock) as an instant with an offset, as the API wants it. */
const localToIso = (value: string) => (value ? new Date(value).toISOString() : '');
const isoToLocal = (iso: string | null) => {
  if (!iso) return '';
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
};

/**
 * One campaign: composed and saved while a DRAFT (or SCHEDULED), test-sent, sent or scheduled;
 * followed live while it sends; its figures and their course over time afterwards.
 */
export default function Campaign() {
  const { projectId } = useProject();
  const { campaignId = 'new' } = useParams();
  const isNew = campaignId === 'new';
  const campaign = useQuery({
    queryKey: ['campaign', projectId, campaignId],
    queryFn: () => api<CampaignDto>(`/campaigns/${campaignId}`),
    enabled: !isNew,
    // While it sends, the progress bar follows it every second; a scheduled one is watched for its start.
    refetchInterval: (q) => (q.state.data?.status === 'SENDING' ? 1000 : q.state.data?.status === 'SCHEDULED' ? 5000 : false),
  });

  if (isNew) return <CampaignView key="new" projectId={projectId} campaign={null} />;
  if (campaign.isPending) return <Loading label="Loading the campaign…" />;
  if (!campaign.data) {
    return (
      <>
        <PageHeader title="Campaign" />
        <ErrorNotice error={campaign.error} />
        <p>
          <Link to={`/p/${projectId}/campaigns`}>Back to campaigns</Link>
        </p>
      </>
    );
  }
  return <CampaignView key={campaign.data.id} projectId={projectId} campaign={campaign.data} refreshError={campaign.error} />;
}

function CampaignView({ projectId, campaign, refreshError }: { projectId: string; campaign: CampaignDto | null; refreshError?: unknown }) {
  const client = useQueryClient();
  const navigate = useNavigate();
  const editable = campaign === null || campaign.status === 'DRAFT' || campaign.status === 'SCHEDULED';
  const [draft, setDraft] = useState<Draft>(campaign ? draftOf(campaign) : BLANK);
  const saved = campaign ? draftOf(campaign) : null;
  const dirty = saved === null || !sameDraft(draft, saved);
  const [notice, setNotice] = useState<string | null>(null);
  const queryKey = ['campaign', projectId, campaign?.id ?? 'new'];
  const [focusTo, setFocusTo] = useState<string | null>(null);
  useEffect(() => {
    const target = focusTo ? document.getElementById(focusTo) : null;
    if (target) {
      target.focus();
      setFocusTo(null);
    }
  });

  const put = (body: Record<string, unknown>) =>
    api<CampaignDto>(`/campaigns/${campaign!.id}`, { method: 'PUT', body }).then((c) => {
      client.setQueryData(queryKey, c);
      return c;
    });

  const save = useMutation({
    mutationFn: async () => {
      if (campaign === null) return api<CampaignDto>('/campaigns', { method: 'POST', body: bodyOf(draft) });
      return put({ ...bodyOf(draft), ...(campaign.status === 'SCHEDULED' ? { scheduledFor: campaign.scheduledFor } : {}) });
    },
    onSuccess: (c) => {
      void client.invalidateQueries({ queryKey: ['campaigns', projectId] });
      if (campaign === null) {
        client.setQueryData(['campaign', projectId, c.id], c);
        navigate(`/p/${projectId}/campaigns/${c.id}`, { replace: true });
      } else setNotice('Saved.');
    },
  });

  /** Sending and test copies use what is saved: unsaved edits are saved first. */
  const saveFirst = async () => {
    if (campaign && dirty) await save.mutateAsync();
  };

  const duplicate = useMutation({
    mutationFn: () => api<CampaignDto>(`/campaigns/${campaign!.id}/duplicate`, { method: 'POST' }),
    onSuccess: (copy) => {
      void client.invalidateQueries({ queryKey: ['campaigns', projectId] });
      client.setQueryData(['campaign', projectId, copy.id], copy);
      navigate(`/p/${projectId}/campaigns/${copy.id}`);
    },
  });
  const remove = useMutation({
    mutationFn: () => api(`/campaigns/${campaign!.id}`, { method: 'DELETE' }),
    onSuccess: () => {
      // The list is loaded afresh rather than shown from memory with the deleted campaign in it.
      client.removeQueries({ queryKey: ['campaigns', projectId] });
      navigate(`/p/${projectId}/campaigns`);
    },
  });
  const cancel = useMutation({
    mutationFn: () => api<CampaignDto>(`/campaigns/${campaign!.id}/cancel`, { method: 'POST' }),
    onSuccess: (c) => {
      client.setQueryData(queryKey, c);
      void client.invalidateQueries({ queryKey: ['campaigns', projectId] });
      setNotice(c.startedAt ? 'Sending stopped: the campaign is cancelled.' : 'The schedule is cancelled; nothing was sent.');
    },
  });

  const title = campaign ? campaign.name : 'New campaign';
  return (
    <>
      <PageHeader
        title={title}
        description={
          campaign ? (
            <>
              <StatusBadge status={campaign.status} /> <StatusLine campaign={campaign} />
            </>
          ) : (
            'Compose the message and choose its audience; nothing is sent until you send it.'
          )
        }
      >
        <Link to={`/p/${projectId}/campaigns`} className="button">
          All campaigns
        </Link>
        {campaign ? (
          <button type="button" onClick={() => duplicate.mutate()} disabled={duplicate.isPending}>
            Duplicate
          </button>
        ) : null}
        {campaign && campaign.status !== 'SCHEDULED' && campaign.status !== 'SENDING' ? (
          <ConfirmDialog
            trigger={
              <button type="button" className="button-danger">
                Delete
              </button>
            }
            title={`Delete “${campaign.name}”?`}
            description="The campaign is removed for good; emails it already sent stay in the contacts’ history."
            confirmLabel="Delete"
            pendingLabel="Deleting…"
            onConfirm={() => remove.mutateAsync()}
          />
        ) : null}
      </PageHeader>
      <div aria-live="polite">
        {notice ? (
          <div className="notice notice-ok">
            <p>{notice}</p>
          </div>
        ) : null}
      </div>
      <ErrorNotice error={duplicate.error ?? refreshError} />

      {campaign && campaign.status !== 'DRAFT' ? (
        <Delivery projectId={projectId} campaign={campaign} onCancel={() => cancel.mutateAsync()} />
      ) : null}

      {editable ? (
        <Composer
          projectId={projectId}
          draft={draft}
          setDraft={(d) => {
            setNotice(null);
            setDraft(d);
          }}
          error={save.error}
          saving={save.isPending}
          dirty={dirty}
          isNew={campaign === null}
          onSave={() => save.mutate()}
        />
      ) : (
        <MessageSummary projectId={projectId} campaign={campaign!} />
      )}

      {campaign?.status === 'DRAFT' ? (
        <div className="grid-2">
          <TestSend campaign={campaign} saveFirst={saveFirst} />
          <SendCard
            campaign={campaign}
            saveFirst={saveFirst}
            onSent={(c) => {
              client.setQueryData(queryKey, c);
              void client.invalidateQueries({ queryKey: ['campaigns', projectId] });
              // The send controls leave the page; keyboard and screen reader users land on what replaced them.
              setFocusTo(c.status === 'SCHEDULED' ? 'schedule-heading' : 'progress-heading');
            }}
          />
        </div>
      ) : null}
      {campaign?.status === 'SCHEDULED' ? (
        <Reschedule
          campaign={campaign}
          onMove={async (iso) => {
            // Only the time moves; edits in the form stay unsaved until saved.
            const c = await put({ ...bodyOf(draftOf(campaign)), scheduledFor: iso });
            setNotice(`Moved: it now sends ${formatDate(c.scheduledFor)}.`);
          }}
          onCancel={() => cancel.mutateAsync()}
        />
      ) : null}
    </>
  );
}

function StatusLine({ campaign: c }: { campaign: CampaignDto }) {
  switch (c.status) {
    case 'DRAFT':
      return <>Not sent yet. Created {formatDate(c.createdAt)}.</>;
    case 'SCHEDULED':
      return <>Sends {formatDate(c.scheduledFor)}.</>;
    case 'SENDING':
      return <>Sending since {formatDate(c.startedAt)}.</>;
    case 'SENT':
      return <>Sent {formatDate(c.sentAt)}.</>;
    case 'CANCELLED':
      return <>Cancelled {formatDate(c.cancelledAt)}.</>;
  }
}

// ---- Compose --------------------------------------------------------------------------------------

function Composer({
  projectId,
  draft,
  setDraft,
  error,
  saving,
  dirty,
  isNew,
  onSave,
}: {
  projectId: string;
  draft: Draft;
  setDraft: (d: Draft) => void;
  error: unknown;
  saving: boolean;
  dirty: boolean;
  isNew: boolean;
  onSave: () => void;
}) {
  const segments = useSegments(projectId);
  const templates = useTemplateChoices(projectId);
  const audience = useQuery({
    queryKey: ['campaign-audience', projectId, draft.segmentId, draft.type],
    queryFn: () =>
      api<{ recipients: number }>('/campaigns/audience', { query: { segmentId: draft.segmentId || undefined, type: draft.type } }),
  });
  const [templateId, setTemplateId] = useState('');
  const set = <K extends keyof Draft>(key: K) => (event: { target: { value: string } }) => setDraft({ ...draft, [key]: event.target.value as Draft[K] });
  const typeName = useId();

  const useTemplate = () => {
    const t = templates.data?.find((x) => x.id === templateId);
    if (!t) return;
    setDraft({
      ...draft,
      name: draft.name || t.name,
      subject: t.subject,
      body: t.body,
      from: t.from ?? draft.from,
      fromName: t.fromName ?? draft.fromName,
      replyTo: t.replyTo ?? draft.replyTo,
      type: t.type,
    });
  };

  const submit = (event: FormEvent) => {
    event.preventDefault();
    onSave();
  };

  return (
    <form onSubmit={submit} aria-label="Compose the campaign" noValidate>
      <ErrorNotice error={error} />
      <div className="grid-2">
        <section className="card" aria-labelledby="compose-message">
          <h2 id="compose-message">Message</h2>
          <TextField label="Campaign name" value={draft.name} onChange={set('name')} required error={fieldError(error, 'name')} hint="Only you see it." />
          <div className="template-pick">
            <SelectField
              label="Start from a template"
              value={templateId}
              onChange={(e) => setTemplateId(e.target.value)}
              hint={templates.error ? 'The templates could not be loaded.' : 'Copies its subject, body and sender into the form.'}
            >
              <option value="">Choose a template…</option>
              {templates.data?.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name}
                </option>
              ))}
            </SelectField>
            <button type="button" onClick={useTemplate} disabled={!templateId}>
              Use template
            </button>
          </div>
          <TextField
            label="Subject"
            value={draft.subject}
            onChange={set('subject')}
            required
            error={fieldError(error, 'subject')}
            hint={'Handlebars: {{first ?? "there"}} is the contact’s data.'}
          />
          <TextArea
            label="Body (HTML)"
            value={draft.body}
            onChange={set('body')}
            required
            rows={12}
            className="code-input"
            spellCheck={false}
            error={fieldError(error, 'body')}
          />
          {draft.body ? (
            <details className="preview">
              <summary>Preview the body</summary>
              <iframe title="Body preview" sandbox="" srcDoc={draft.body} />
            </details>
          ) : null}
        </section>
        <div>
          <section className="card" aria-labelledby="compose-sender">
            <h2 id="compose-sender">Sender</h2>
            <TextField
              label="From address"
              type="email"
              value={draft.from}
              onChange={set('from')}
              required
              autoComplete="off"
              error={fieldError(error, 'from')}
              hint={<SenderHint projectId={projectId} />}
            />
            <TextField label="From name" value={draft.fromName} onChange={set('fromName')} error={fieldError(error, 'fromName')} />
            <TextField label="Reply-to address" type="email" value={draft.replyTo} onChange={set('replyTo')} error={fieldError(error, 'replyTo')} />
          </section>
          <section className="card" aria-labelledby="compose-audience">
            <h2 id="compose-audience">Audience</h2>
            <SelectField label="Send to" value={draft.segmentId} onChange={set('segmentId')} error={fieldError(error, 'segmentId')}>
              <option value="">Everyone subscribed</option>
              {segments.data?.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.name} (segment, {s.memberCount.toLocaleString()} members)
                </option>
              ))}
            </SelectField>
            <fieldset className="radio-group">
              <legend>Kind of mail</legend>
              <label>
                <input type="radio" name={typeName} checked={draft.type === 'MARKETING'} onChange={() => setDraft({ ...draft, type: 'MARKETING' })} />
                <span>
                  Marketing <span className="muted">— subscribed contacts only, with an unsubscribe link and open and click tracking</span>
                </span>
              </label>
              <label>
                <input
                  type="radio"
                  name={typeName}
                  checked={draft.type === 'TRANSACTIONAL'}
                  onChange={() => setDraft({ ...draft, type: 'TRANSACTIONAL' })}
                />
                <span>
                  Transactional <span className="muted">— service mail; reaches a segment’s unsubscribed members too</span>
                </span>
              </label>
            </fieldset>
            <p className="recipient-count" role="status">
              {audience.isPending ? (
                'Counting recipients…'
              ) : audience.data ? (
                <>
                  <strong>{audience.data.recipients.toLocaleString()}</strong> {audience.data.recipients === 1 ? 'recipient' : 'recipients'} if sent now
                </>
              ) : (
                'The recipients could not be counted.'
              )}
            </p>
            <ErrorNotice error={audience.error ?? segments.error} />
          </section>
        </div>
      </div>
      <div className="actions form-actions">
        <button type="submit" className="button-primary" disabled={saving || (!dirty && !isNew)}>
          {saving ? 'Saving…' : isNew ? 'Create draft' : 'Save changes'}
        </button>
        {!isNew && dirty ? <span className="muted">Unsaved changes</span> : null}
      </div>
    </form>
  );
}

function MessageSummary({ projectId, campaign: c }: { projectId: string; campaign: CampaignDto }) {
  const segments = useSegments(projectId);
  return (
    <section className="card" aria-labelledby="summary-heading">
      <h2 id="summary-heading">Message</h2>
      <dl className="facts">
        <dt>Subject</dt>
        <dd>{c.subject}</dd>
        <dt>From</dt>
        <dd>{c.fromName ? `${c.fromName} <${c.from}>` : c.from}</dd>
        {c.replyTo ? (
          <>
            <dt>Reply to</dt>
            <dd>{c.replyTo}</dd>
          </>
        ) : null}
        <dt>Audience</dt>
        <dd>
          {audienceName(c.segmentId, segments.data)} · {c.type === 'MARKETING' ? 'marketing' : 'transactional'}
        </dd>
      </dl>
      <details className="preview">
        <summary>Show the body</summary>
        <iframe title="Body of the campaign" sandbox="" srcDoc={c.body} />
      </details>
    </section>
  );
}

// ---- Test, send, schedule -------------------------------------------------------------------------

function TestSend({ campaign, saveFirst }: { campaign: CampaignDto; saveFirst: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const test = useMutation({
    mutationFn: async () => {
      await saveFirst();
      return api<{ email: string }>(`/campaigns/${campaign.id}/test`, { method: 'POST', body: { email } });
    },
  });
  return (
    <section className="card" aria-labelledby="test-heading">
      <h2 id="test-heading">Send a test</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          test.mutate();
        }}
        noValidate
      >
        <TextField
          label="Test address"
          type="email"
          value={email}
          onChange={(e) => setEmail(e.target.value)}
          autoComplete="email"
          error={fieldError(test.error, 'email')}
          hint="One copy, rendered with that contact’s data if there is one; the campaign does not change."
        />
        <ErrorNotice error={test.error && !fieldError(test.error, 'email') ? test.error : null} />
        <div className="actions">
          <button type="submit" disabled={!email || test.isPending}>
            {test.isPending ? 'Sending…' : 'Send test'}
          </button>
          <span role="status">{test.isSuccess ? `Test copy on its way to ${test.data.email}.` : ''}</span>
        </div>
      </form>
    </section>
  );
}

function SendCard({ campaign, saveFirst, onSent }: { campaign: CampaignDto; saveFirst: () => Promise<void>; onSent: (c: CampaignDto) => void }) {
  const [when, setWhen] = useState<'now' | 'later'>('now');
  const [at, setAt] = useState('');
  const whenName = useId();
  const send = useMutation({
    mutationFn: async () => {
      await saveFirst();
      return api<CampaignDto>(`/campaigns/${campaign.id}/send`, {
        method: 'POST',
        body: when === 'later' ? { scheduledFor: localToIso(at) } : {},
      });
    },
    onSuccess: onSent,
  });
  const audience = useQuery({
    queryKey: ['campaign-audience', campaign.segmentId ?? '', campaign.type, campaign.id],
    queryFn: () => api<{ recipients: number }>('/campaigns/audience', { query: { segmentId: campaign.segmentId ?? undefined, type: campaign.type } }),
  });
  const count = audience.data ? `${audience.data.recipients.toLocaleString()} ${audience.data.recipients === 1 ? 'recipient' : 'recipients'}` : 'its audience';
  const scheduleError = fieldError(send.error, 'scheduledFor');
  return (
    <section className="card" aria-labelledby="send-heading">
      <h2 id="send-heading">Send</h2>
      <fieldset className="radio-group">
        <legend>When</legend>
        <label>
          <input type="radio" name={whenName} checked={when === 'now'} onChange={() => setWhen('now')} /> Now
        </label>
        <label>
          <input type="radio" name={whenName} checked={when === 'later'} onChange={() => setWhen('later')} /> At a set time
        </label>
      </fieldset>
      {when === 'later' ? (
        <TextField
          label="Send at"
          type="datetime-local"
          value={at}
          onChange={(e) => setAt(e.target.value)}
          error={scheduleError}
          hint={`Your time (${READER_TIME_ZONE}).`}
        />
      ) : null}
      <ConfirmDialog
        trigger={
          <button type="button" className="button-primary" disabled={send.isPending || (when === 'later' && !at)}>
            {when === 'now' ? 'Send now…' : 'Schedule…'}
          </button>
        }
        title={when === 'now' ? `Send “${campaign.name}” now?` : `Schedule “${campaign.name}”?`}
        description={
          when === 'now'
            ? `It goes to ${count} at once. A send can be stopped, but what went cannot be taken back.`
            : `It goes to ${count} ${at ? formatDate(localToIso(at)) : ''}; you can move or cancel it until then.`
        }
        confirmLabel={when === 'now' ? 'Send now' : 'Schedule'}
        pendingLabel={when === 'now' ? 'Sending…' : 'Scheduling…'}
        destructive={false}
        onConfirm={() => send.mutateAsync()}
      />
    </section>
  );
}

function Reschedule({
  campaign,
  onMove,
  onCancel,
}: {
  campaign: CampaignDto;
  onMove: (iso: string) => Promise<void>;
  onCancel: () => Promise<unknown>;
}) {
  const [at, setAt] = useState(isoToLocal(campaign.scheduledFor));
  const move = useMutation({ mutationFn: () => onMove(localToIso(at)) });
  return (
    <section className="card" aria-labelledby="schedule-heading">
      <h2 id="schedule-heading" tabIndex={-1}>
        Schedule
      </h2>
      <p>
        Sends <strong>{formatDate(campaign.scheduledFor)}</strong> to about {campaign.totalRecipients.toLocaleString()} recipients (counted again when
        it starts).
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          move.mutate();
        }}
        noValidate
      >
        <TextField
          label="Move to"
          type="datetime-local"
          value={at}
          onChange={(e) => setAt(e.target.value)}
          error={fieldError(move.error, 'scheduledFor')}
          hint={`Your time (${READER_TIME_ZONE}).`}
        />
        <ErrorNotice error={move.error && !fieldError(move.error, 'scheduledFor') ? move.error : null} />
        <div className="actions">
          <button type="submit" disabled={!at || move.isPending}>
            Move
          </button>
          <ConfirmDialog
            trigger={
              <button type="button" className="button-danger">
                Cancel the schedule
              </button>
            }
            title="Cancel the scheduled send?"
            description="Nothing is sent and the campaign ends as cancelled; duplicate it to send it later."
            confirmLabel="Cancel the send"
            pendingLabel="Cancelling…"
            cancelLabel="Keep it scheduled"
            onConfirm={onCancel}
          />
        </div>
      </form>
    </section>
  );
}

// ---- Progress, figures, chart ---------------------------------------------------------------------

function Delivery({
  projectId,
  campaign: c,
  onCancel,
}: {
  projectId: string;
  campaign: CampaignDto;
  onCancel: () => Promise<unknown>;
}) {
  const started = c.startedAt !== null;
  if (c.status === 'SCHEDULED' || (!started && c.status === 'CANCELLED')) return null;
  const s = c.stats;
  return (
    <>
      <section className="card" aria-labelledby="progress-heading">
        <h2 id="progress-heading" tabIndex={-1}>{c.status === 'SENDING' ? 'Sending' : 'Delivery'}</h2>
        <ProgressBar value={s.sent} max={c.totalRecipients} label={`Sent ${s.sent.toLocaleString()} of ${c.totalRecipients.toLocaleString()}`} />
        <Milestones campaign={c} />
        {c.status === 'SENDING' ? (
          <ConfirmDialog
            trigger={
              <button type="button" className="button-danger">
                Cancel sending
              </button>
            }
            title="Stop sending?"
            description={`${s.sent.toLocaleString()} of ${c.totalRecipients.toLocaleString()} have gone; the rest will not be sent. This cannot be resumed.`}
            confirmLabel="Stop sending"
            pendingLabel="Stopping…"
            cancelLabel="Keep sending"
            onConfirm={onCancel}
          />
        ) : null}
      </section>
      <section aria-labelledby="figures-heading">
        <h2 id="figures-heading">Figures</h2>
        <div className="stat-row">
          <Stat label="Recipients" value={c.totalRecipients} />
          <Stat label="Sent" value={s.sent} />
          <Stat label="Delivered" value={s.delivered} />
          <Stat label="Opened" value={s.opened} rate={s.openRate} />
          <Stat label="Clicked" value={s.clicked} rate={s.clickRate} />
          <Stat label="Bounced" value={s.bounced} rate={s.bounceRate} />
          <Stat label="Complained" value={s.complained} />
          <Stat label="Unsubscribed" value={s.unsubscribed} />
        </div>
      </section>
      <CampaignChart projectId={projectId} campaign={c} />
    </>
  );
}

function Stat({ label, value, rate }: { label: string; value: number; rate?: number }) {
  return (
    <div className="stat">
      <span className="muted">{label}</span>
      <span className="value">{value.toLocaleString()}</span>
      {rate !== undefined ? <span className="muted">{formatPercent(rate)} of sent</span> : null}
    </div>
  );
}

/** Says progress aloud at each quarter, and the end, without reading out every second's change. */
function Milestones({ campaign: c }: { campaign: CampaignDto }) {
  const quarter = c.totalRecipients > 0 ? Math.floor((4 * c.stats.sent) / c.totalRecipients) : 0;
  const [said, setSaid] = useState('');
  const last = useRef({ quarter, status: c.status });
  useEffect(() => {
    if (c.status !== last.current.status && c.status !== 'SENDING') setSaid(c.status === 'SENT' ? 'The campaign is sent.' : 'Sending stopped.');
    else if (c.status === 'SENDING' && quarter > last.current.quarter) setSaid(`${quarter * 25} % sent.`);
    last.current = { quarter, status: c.status };
  }, [quarter, c.status]);
  return (
    <p className="visually-hidden" role="status">
      {said}
    </p>
  );
}

function chartRange(c: CampaignDto): { interval: Interval; from: string } | null {
  const start = c.startedAt ? new Date(c.startedAt) : null;
  if (!start) return null;
  const age = Date.now() - start.getTime();
  if (age <= 48 * 3_600_000) {
    const hour = new Date(start);
    hour.setMinutes(0, 0, 0);
    return { interval: 'hour', from: hour.toISOString() };
  }
  const day = new Date(start);
  day.setHours(0, 0, 0, 0);
  return { interval: age <= 120 * 86_400_000 ? 'day' : 'week', from: day.toISOString() };
}

function CampaignChart({ projectId, campaign: c }: { projectId: string; campaign: CampaignDto }) {
  const range = chartRange(c);
  const series = useQuery({
    queryKey: ['campaign-series', projectId, c.id, range?.interval, range?.from, c.status],
    queryFn: () =>
      api<{ series: SeriesPoint[]; timezone: string }>('/analytics/timeseries', {
        query: { campaignId: c.id, metric: 'all', interval: range!.interval, from: range!.from, timezone: READER_TIME_ZONE },
      }),
    enabled: range !== null,
    refetchInterval: c.status === 'SENDING' ? 3000 : false,
  });
  if (!range) return null;
  return (
    <section className="card" aria-labelledby="chart-heading">
      <h2 id="chart-heading">Over time</h2>
      <ErrorNotice error={series.error} />
      {series.data ? (
        <SeriesChart
          title={`Emails of this campaign per ${range.interval}`}
          data={series.data.series}
          metrics={EMAIL_METRICS}
          interval={range.interval}
          timeZone={series.data.timezone}
          kind="bar"
        />
      ) : series.isPending ? (
        <Loading label="Loading the chart…" />
      ) : null}
    </section>
  );
}
