import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { type Domain, domainsQuery, type RecordPurpose, type RecordState } from '../../api/domains';
import { roleAtLeast } from '../../api/session';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { formatDate } from '../../components/format';
import { CopyButton, EmptyState, ErrorNotice, fieldError, Loading, PageHeader, TextField } from '../../components/ui';
import './domains.css';

const PURPOSE: Record<RecordPurpose, string> = {
  dkim: 'DKIM: required to verify the domain',
  spf: 'SPF: helps delivery',
  dmarc: 'DMARC: helps delivery',
  'return-path': 'Return path: brings bounces back',
};

const STATE: Record<RecordState, { text: string; className: string }> = {
  ok: { text: 'Found', className: 'badge badge-ok' },
  missing: { text: 'Not found', className: 'badge badge-danger' },
  mismatch: { text: 'Different value', className: 'badge badge-danger' },
  unreachable: { text: 'DNS did not answer', className: 'badge' },
};

/** While a domain waits for its records, the list is read again this often to show the background check's result. */
const PENDING_POLL_MS = 3_000;

export default function Domains() {
  const { projectId, role } = useProject();
  const admin = roleAtLeast(role, 'ADMIN');
  const query = domainsQuery(projectId);
  const key = query.queryKey;
  const domains = useQuery({
    ...query,
    refetchInterval: (query) => (query.state.data?.some((d) => d.status === 'pending') ? PENDING_POLL_MS : false),
  });
  return (
    <>
      <title>Domains · Tidings</title>
      <PageHeader
        title="Domains"
        description="Mail is sent from your own domains. Publish each domain's DNS records; it is verified once its DKIM record is found."
      />
      {admin ? <AddDomain projectKey={key} /> : <p className="notice">Adding, checking and removing domains needs the admin role.</p>}
      <ErrorNotice error={domains.error} />
      {domains.isPending ? (
        <Loading />
      ) : domains.data && domains.data.length === 0 ? (
        <EmptyState>No domain yet. Add the domain you send from, such as mail.example.com.</EmptyState>
      ) : (
        (domains.data ?? []).map((d) => <DomainCard key={d.id} domain={d} admin={admin} projectKey={key} />)
      )}
    </>
  );
}

function AddDomain({ projectKey }: { projectKey: readonly unknown[] }) {
  const client = useQueryClient();
  const [name, setName] = useState('');
  const add = useMutation({
    mutationFn: () => api<Domain>('/domains', { method: 'POST', body: { domain: name } }),
    onSuccess: (domain) => {
      setName('');
      client.setQueryData<Domain[]>(projectKey, (list) => [domain, ...(list ?? []).filter((d) => d.id !== domain.id)]);
      void client.invalidateQueries({ queryKey: projectKey });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate();
  };
  const nameError = fieldError(add.error, 'domain');
  return (
    <section className="card" aria-labelledby="add-domain-heading">
      <h2 id="add-domain-heading">Add a domain</h2>
      <form onSubmit={submit} noValidate className="add-domain">
        <TextField
          label="Domain"
          value={name}
          onChange={(e) => setName(e.target.value)}
          placeholder="mail.example.com"
          autoCapitalize="none"
          spellCheck={false}
          required
          error={nameError}
        />
        <button type="submit" className="button-primary" disabled={add.isPending || name.trim() === ''}>
          {add.isPending ? 'Adding…' : 'Add domain'}
        </button>
      </form>
      <ErrorNotice error={nameError ? null : add.error} />
    </section>
  );
}

function DomainCard({ domain: d, admin, projectKey }: { domain: Domain; admin: boolean; projectKey: readonly unknown[] }) {
  const client = useQueryClient();
  const replace = (next: Domain) => client.setQueryData<Domain[]>(projectKey, (list) => (list ?? []).map((x) => (x.id === next.id ? next : x)));
  const check = useMutation({
    mutationFn: () => api<Domain>(`/domains/${encodeURIComponent(d.id)}/verify`),
    onSuccess: replace,
  });
  const remove = useMutation({
    mutationFn: () => api(`/domains/${encodeURIComponent(d.id)}`, { method: 'DELETE' }),
    onSuccess: () => {
      client.setQueryData<Domain[]>(projectKey, (list) => (list ?? []).filter((x) => x.id !== d.id));
      void client.invalidateQueries({ queryKey: projectKey });
    },
  });
  const headingId = `domain-${d.id}`;
  const stateOf = (r: Domain['records'][number]): RecordState | undefined => {
    const records = d.lastCheck?.records;
    if (!records) return undefined;
    if (r.purpose === 'return-path') return r.type === 'MX' ? records.returnPathMx : records.returnPathSpf;
    return records[r.purpose];
  };
  return (
    <section className="card domain" aria-labelledby={headingId}>
      <div className="domain-head">
        <h2 id={headingId}>{d.domain}</h2>
        <span role="status" className={d.status === 'verified' ? 'badge badge-ok' : 'badge'}>
          {d.status === 'verified' ? 'Verified' : 'Pending verification'}
        </span>
      </div>
      <p className="muted">
        {d.status === 'verified'
          ? `Verified ${formatDate(d.verifiedAt)}.`
          : 'Publish the records below at your DNS provider. They are checked every few minutes; this page updates by itself.'}{' '}
        {d.lastCheckedAt ? `Last checked ${formatDate(d.lastCheckedAt)}.` : 'Not checked yet.'}
        {d.sending.allowed && d.status !== 'verified' ? ` ${d.sending.reason}` : ''}
      </p>
      {d.returnPathVerifiedAt ? <p className="muted">Bounces come back through the return path since {formatDate(d.returnPathVerifiedAt)}.</p> : null}
      <ul className="dns-records" aria-label={`DNS records for ${d.domain}`}>
        {d.records.map((r, i) => {
          const state = stateOf(r);
          return (
            <li key={`${r.purpose}-${r.type}-${i}`} className="dns-record">
              <div className="dns-type">
                <strong>{r.type}</strong> <span className="muted">{PURPOSE[r.purpose]}</span>{' '}
                {state ? <span className={STATE[state].className}>{STATE[state].text}</span> : null}
              </div>
              <dl>
                <div>
                  <dt>Name</dt>
                  <dd>
                    <code>{r.name}</code> <CopyButton value={r.name} label="Copy name" />
                  </dd>
                </div>
                <div>
                  <dt>Value</dt>
                  <dd>
                    <code>{r.value}</code> <CopyButton value={r.value} label="Copy value" />
                  </dd>
                </div>
              </dl>
            </li>
          );
        })}
      </ul>
      <ErrorNotice error={check.error} />
      {check.data ? (
        <p role="status" className={check.data.status === 'verified' ? 'notice notice-ok' : 'notice'}>
          {check.data.status === 'verified'
            ? 'The DKIM record was found: the domain is verified.'
            : check.data.lastCheck?.conclusive === false
              ? 'DNS did not answer in time; try again in a moment.'
              : 'The DKIM record was not found yet. DNS changes can take a while to spread.'}
        </p>
      ) : null}
      {admin ? (
        <div className="actions">
          <button type="button" onClick={() => check.mutate()} disabled={check.isPending}>
            {check.isPending ? 'Checking…' : 'Check now'}
          </button>
          <ConfirmDialog
            trigger={
              <button type="button" className="button-danger">
                Remove…
              </button>
            }
            title={`Remove ${d.domain}?`}
            description="Mail can no longer be sent from it, and its DKIM key is deleted: adding it again means publishing new records."
            confirmLabel="Remove domain"
            pendingLabel="Removing…"
            onConfirm={() => remove.mutateAsync()}
          />
        </div>
      ) : null}
    </section>
  );
}
