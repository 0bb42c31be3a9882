import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../api/client';
import type { Template } from '../../api/templates';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { type TemplateUsage, TYPE_LABELS } from './model';
import './templates.css';

export default function Templates() {
  const { projectId } = useProject();
  const client = useQueryClient();
  const list = useCursorList<Template>(['templates', projectId], '/templates', { limit: 20 });
  const [copied, setCopied] = useState<Template | null>(null);

  const duplicate = useMutation({
    mutationFn: (t: Template) => api<Template>(`/templates/${t.id}/duplicate`, { method: 'POST' }),
    onSuccess: async (copy) => {
      setCopied(copy);
      list.reset();
      await client.invalidateQueries({ queryKey: ['templates', projectId] });
    },
  });

  const remove = useMutation({
    mutationFn: (t: Template) => api(`/templates/${t.id}`, { method: 'DELETE' }),
    onSuccess: async () => {
      list.reset();
      await client.invalidateQueries({ queryKey: ['templates', projectId] });
    },
  });

  const templates = list.data?.data ?? [];
  return (
    <>
      <PageHeader title="Templates" description="Subjects and HTML bodies with variables, for /v1/send and journeys.">
        <Link to="new" className="button button-primary">
          New template
        </Link>
      </PageHeader>
      <ErrorNotice error={list.error ?? duplicate.error} />
      {copied ? (
        <p role="status" className="notice notice-ok">
          Copied as <Link to={copied.id}>{copied.name}</Link>.
        </p>
      ) : null}
      {list.isPending ? (
        <Loading />
      ) : templates.length === 0 && !list.hasPrevious ? (
        list.error ? null : (
          <EmptyState>
            <p>No templates yet.</p>
            <Link to="new" className="button">
              Write the first one
            </Link>
          </EmptyState>
        )
      ) : (
        <>
          <TableScroll label="Templates">
            <table>
              <caption className="visually-hidden">Templates</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Subject</th>
                  <th scope="col">Type</th>
                  <th scope="col">Updated</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {templates.map((t) => (
                  <tr key={t.id}>
                    <td>
                      <Link to={t.id}>{t.name}</Link>
                    </td>
                    <td className="template-subject">{t.subject}</td>
                    <td>
                      <span className="badge">{TYPE_LABELS[t.type]}</span>
                    </td>
                    <td>{formatDate(t.updatedAt)}</td>
                    <td>
                      <div className="actions template-row-actions">
                        <button type="button" className="button-small" onClick={() => duplicate.mutate(t)} disabled={duplicate.isPending} aria-label={`Duplicate ${t.name}`}>
                          Duplicate
                        </button>
                        <ConfirmDialog
                          trigger={
                            <button type="button" className="button-small button-danger" aria-label={`Delete ${t.name}`}>
                              Delete
                            </button>
                          }
                          title={`Delete “${t.name}”?`}
                          description={<UsageSummary templateId={t.id} projectId={projectId} />}
                          confirmLabel="Delete"
                          pendingLabel="Deleting…"
                          cancelLabel="Keep it"
                          onConfirm={() => remove.mutateAsync(t)}
                        />
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          <CursorPager list={list} label="Templates" />
        </>
      )}
    </>
  );
}

/** Where the template is used, read when the delete dialog opens, so the user knows what a delete breaks. */
function UsageSummary({ templateId, projectId }: { templateId: string; projectId: string }) {
  const query = useQuery({
    queryKey: ['template-usage', projectId, templateId],
    queryFn: () => api<TemplateUsage>(`/templates/${templateId}/usage`),
  });
  const usage = query.data;
  if (query.isPending) return <p role="status">Checking where it is used…</p>;
  if (!usage) {
    return (
      <>
        <p>Its use could not be checked.</p>
        <ErrorNotice error={query.error} />
      </>
    );
  }
  const journeys = [...new Set(usage.workflowSteps.map((s) => s.workflowId))];
  if (usage.campaigns.length === 0 && journeys.length === 0) return <p>No campaign or journey uses it. This cannot be undone.</p>;
  return (
    <>
      <p>It is still used by these, which cannot send it once it is gone:</p>
      <ul>
        {usage.campaigns.map((c) => (
          <li key={c.id}>
            Campaign <Link to={`/p/${projectId}/campaigns/${c.id}`}>{c.name}</Link>
          </li>
        ))}
        {journeys.map((id) => {
          const steps = usage.workflowSteps.filter((s) => s.workflowId === id).length;
          return (
            <li key={id}>
              <Link to={`/p/${projectId}/journeys/${id}`}>Journey {id}</Link> ({steps} {steps === 1 ? 'step' : 'steps'})
            </li>
          );
        })}
      </ul>
    </>
  );
}
