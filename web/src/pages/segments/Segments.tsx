import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api } from '../../api/client';
import { type Segment, useSegments } from '../../api/segments';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { TYPE_LABELS } from './model';
import './segments.css';

export default function Segments() {
  const { projectId } = useProject();
  const client = useQueryClient();
  const segments = useSegments(projectId);
  const remove = useMutation({
    mutationFn: (s: Segment) => api(`/segments/${s.id}`, { method: 'DELETE' }),
    onSuccess: async () => {
      await client.invalidateQueries({ queryKey: ['segments', projectId] });
    },
  });

  return (
    <>
      <PageHeader title="Segments" description="Groups of contacts: by a condition (dynamic) or a list you keep (static).">
        <Link to="new" className="button button-primary">
          New segment
        </Link>
      </PageHeader>
      <ErrorNotice error={segments.error} />
      {segments.isPending ? (
        <Loading />
      ) : !segments.data ? null : segments.data.length === 0 ? (
        <EmptyState>
          <p>No segments yet.</p>
          <Link to="new" className="button">
            Build the first one
          </Link>
        </EmptyState>
      ) : (
        <TableScroll label="Segments">
          <table>
            <caption className="visually-hidden">Segments</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Type</th>
                <th scope="col" className="segment-count">
                  Members
                </th>
                <th scope="col">Counted</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {segments.data.map((s) => (
                <tr key={s.id}>
                  <td>
                    <Link to={s.id}>{s.name}</Link>
                    {s.description ? <div className="muted segment-description">{s.description}</div> : null}
                  </td>
                  <td>
                    <span className="badge">{TYPE_LABELS[s.type]}</span>
                  </td>
                  <td className="segment-count">{s.memberCount.toLocaleString()}</td>
                  <td>{formatDate(s.memberCountUpdatedAt)}</td>
                  <td>
                    <ConfirmDialog
                      trigger={
                        <button type="button" className="button-small button-danger" aria-label={`Delete ${s.name}`}>
                          Delete
                        </button>
                      }
                      title={`Delete “${s.name}”?`}
                      description={`Its ${s.memberCount.toLocaleString()} contacts stay; conditions of other segments that name it match no one through it. A segment used by a scheduled or sending campaign cannot be deleted. This cannot be undone.`}
                      confirmLabel="Delete"
                      pendingLabel="Deleting…"
                      cancelLabel="Keep it"
                      onConfirm={() => remove.mutateAsync(s)}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
    </>
  );
}
