import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { api } from '../../api/client';
import { TableScroll } from '../../components/TableScroll';
import { ErrorNotice, ProgressBar } from '../../components/ui';

export type BulkOperation = 'subscribe' | 'unsubscribe' | 'delete';

/** GET /contacts/bulk/:jobId (api/schemas/bulk.ts bulkJobSchema). */
export interface BulkJobState {
  jobId: string;
  operation: BulkOperation;
  status: 'queued' | 'running' | 'completed' | 'failed';
  total: number;
  processed: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: Array<{ contactId: string; reason: string }>;
}

const RUNNING: Record<BulkOperation, string> = { subscribe: 'Subscribing', unsubscribe: 'Unsubscribing', delete: 'Deleting' };
const DONE: Record<BulkOperation, string> = { subscribe: 'Subscribed', unsubscribe: 'Unsubscribed', delete: 'Deleted' };

const finished = (job: BulkJobState | undefined) => job?.status === 'completed' || job?.status === 'failed';

/**
 * A bulk job's progress, polled until it ends, then its outcome. `onFinished` runs once, when the
 * job reaches a final state, so the list behind it can refresh.
 */
export function BulkJob({ jobId, onFinished, onDismiss }: { jobId: string; onFinished: (job: BulkJobState) => void; onDismiss: () => void }) {
  const job = useQuery({
    queryKey: ['contacts-bulk-job', jobId],
    queryFn: () => api<BulkJobState>(`/contacts/bulk/${encodeURIComponent(jobId)}`),
    refetchInterval: (query) => (finished(query.state.data) ? false : 500),
  });
  const reported = useRef(false);
  useEffect(() => {
    if (job.data && finished(job.data) && !reported.current) {
      reported.current = true;
      onFinished(job.data);
    }
  }, [job.data, onFinished]);

  const data = job.data;
  return (
    <section className="card" aria-labelledby={`bulk-${jobId}`}>
      <h2 id={`bulk-${jobId}`}>{data ? `${finished(data) ? DONE[data.operation] : RUNNING[data.operation]} contacts` : 'Bulk action'}</h2>
      <ErrorNotice error={job.error} />
      {data ? (
        <>
          <ProgressBar value={data.processed} max={data.total} label={`${data.processed} of ${data.total} processed`} />
          <div role="status">
            {data.status === 'failed' ? (
              <p className="notice notice-error">The job stopped before the end: {data.processed} of {data.total} were processed.</p>
            ) : data.status === 'completed' ? (
              <ul className="outcome">
                <li>
                  <strong>{data.succeeded}</strong> {data.operation === 'delete' ? 'deleted' : 'changed'}
                </li>
                {data.operation === 'delete' ? null : (
                  <li>
                    <strong>{data.unchanged}</strong> already {data.operation === 'subscribe' ? 'subscribed' : 'unsubscribed'}
                  </li>
                )}
                <li>
                  <strong>{data.failed}</strong> failed
                </li>
              </ul>
            ) : (
              <p className="muted">{data.status === 'queued' ? 'Waiting for the worker…' : 'Working…'}</p>
            )}
          </div>
          {data.errors.length ? (
            <TableScroll label="Contacts that failed">
              <table>
                <caption className="visually-hidden">Contacts that failed</caption>
                <thead>
                  <tr>
                    <th scope="col">Contact</th>
                    <th scope="col">Reason</th>
                  </tr>
                </thead>
                <tbody>
                  {data.errors.map((e) => (
                    <tr key={e.contactId}>
                      <td>
                        <code>{e.contactId}</code>
                      </td>
                      <td>{e.reason === 'not_found' ? 'Not found (already deleted?)' : e.reason}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableScroll>
          ) : null}
        </>
      ) : null}
      {finished(data) || job.error ? (
        <button type="button" className="button-small" onClick={onDismiss}>
          Dismiss
        </button>
      ) : null}
    </section>
  );
}
