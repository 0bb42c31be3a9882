import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../api/client';
import { useSegments } from '../../api/segments';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate, formatPercent } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { audienceName, type Campaign, StatusBadge } from './model';
import './campaigns.css';

/** Every campaign of the project, newest first: where it stands, whom it goes to, what it sent. */
export default function Campaigns() {
  const { projectId } = useProject();
  const client = useQueryClient();
  const list = useCursorList<Campaign>(['campaigns', projectId], '/campaigns', { limit: 20 });
  const segments = useSegments(projectId);
  const [done, setDone] = useState<{ text: string; link?: { to: string; label: string } } | null>(null);

  const refresh = () => client.invalidateQueries({ queryKey: ['campaigns', projectId] });
  const duplicate = useMutation({
    mutationFn: (c: Campaign) => api<Campaign>(`/campaigns/${c.id}/duplicate`, { method: 'POST' }),
    onSuccess: async (copy) => {
      setDone({ text: `Created the draft “${copy.name}”.`, link: { to: `/p/${projectId}/campaigns/${copy.id}`, label: 'Open it' } });
      list.reset();
      await refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (c: Campaign) => api(`/campaigns/${c.id}`, { method: 'DELETE' }).then(() => c),
    onSuccess: async (c) => {
      setDone({ text: `Deleted “${c.name}”.` });
      await refresh();
    },
  });

  return (
    <>
      <PageHeader title="Campaigns" description="One message to an audience: a segment, or everyone subscribed.">
        <Link className="button button-primary" to={`/p/${projectId}/campaigns/new`}>
          New campaign
        </Link>
      </PageHeader>
      <div aria-live="polite">
        {done ? (
          <div className="notice notice-ok">
            <p>
              {done.text} {done.link ? <Link to={done.link.to}>{done.link.label}</Link> : null}
            </p>
          </div>
        ) : null}
      </div>
      <ErrorNotice error={list.error ?? duplicate.error ?? segments.error} />
      {list.isPending ? (
        <Loading label="Loading campaigns…" />
      ) : list.data && list.data.data.length === 0 && !list.hasPrevious ? (
        <EmptyState>
          <p>No campaigns yet.</p>
          <p>
            <Link to={`/p/${projectId}/campaigns/new`}>Compose the first one</Link>
          </p>
        </EmptyState>
      ) : list.data ? (
        <>
          <TableScroll label="Campaigns">
            <table className="campaign-table">
              <caption className="visually-hidden">Campaigns, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Status</th>
                  <th scope="col">Audience</th>
                  <th scope="col">Sent</th>
                  <th scope="col">Opened</th>
                  <th scope="col">When</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((c) => (
                  <tr key={c.id}>
                    <th scope="row">
                      <Link to={`/p/${projectId}/campaigns/${c.id}`}>{c.name}</Link>
                      <span className="muted campaign-subject">{c.subject}</span>
                    </th>
                    <td>
                      <StatusBadge status={c.status} />
                    </td>
                    <td>{audienceName(c.segmentId, segments.data)}</td>
                    <td>
                      {c.status === 'DRAFT' ? (
                        <span className="muted">—</span>
                      ) : (
                        <>
                          {c.stats.sent.toLocaleString()} <span className="muted">of {c.totalRecipients.toLocaleString()}</span>
                        </>
                      )}
                    </td>
                    <td>{c.stats.sent > 0 ? formatPercent(c.stats.openRate) : <span className="muted">—</span>}</td>
                    <td>
                      <When campaign={c} />
                    </td>
                    <td>
                      <div className="actions row-actions">
                        <button
                          type="button"
                          className="button-small"
                          disabled={duplicate.isPending}
                          onClick={() => duplicate.mutate(c)}
                          aria-label={`Duplicate ${c.name}`}
                        >
                          Duplicate
                        </button>
                        {c.status === 'SCHEDULED' || c.status === 'SENDING' ? null : (
                          <ConfirmDialog
                            trigger={
                              <button type="button" className="button-small button-danger" aria-label={`Delete ${c.name}`}>
                                Delete
                              </button>
                            }
                            title={`Delete “${c.name}”?`}
                            description={
                              c.status === 'SENT'
                                ? 'The campaign and its figures leave this list; the emails it sent stay in the contacts’ history.'
                                : 'The campaign is removed for good.'
                            }
                            confirmLabel="Delete"
                            pendingLabel="Deleting…"
                            onConfirm={() => remove.mutateAsync(c)}
                          />
                        )}
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          <CursorPager list={list} label="Campaigns" />
        </>
      ) : null}
    </>
  );
}

function When({ campaign: c }: { campaign: Campaign }) {
  if (c.status === 'SCHEDULED') return <>Sends {formatDate(c.scheduledFor)}</>;
  if (c.status === 'SENT') return <>Sent {formatDate(c.sentAt)}</>;
  if (c.status === 'CANCELLED') return <>Cancelled {formatDate(c.cancelledAt)}</>;
  if (c.status === 'SENDING') return <>Sending since {formatDate(c.startedAt ?? c.updatedAt)}</>;
  return <>Created {formatDate(c.createdAt)}</>;
}
