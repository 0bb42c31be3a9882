import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useId, useRef, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api/client';
import { useProject } from '../../app/project';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { ErrorNotice, PageHeader, ProgressBar } from '../../components/ui';
import './contacts.css';

/** GET /contacts/import/:jobId (api/schemas/imports.ts importJobSchema). */
interface ImportJob {
  jobId: string;
  status: 'queued' | 'running' | 'completed' | 'failed';
  totalRows: number;
  processedRows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: Array<{ row: number; email: string; reason: string }>;
  reason?: string;
  createdAt: string;
  updatedAt: string;
}

const REASONS: Record<string, string> = { missing_email: 'No email', invalid_email: 'Not a valid email' };
const finished = (job: ImportJob | undefined) => job?.status === 'completed' || job?.status === 'failed';

export default function Import() {
  const { projectId } = useProject();
  // The job is in the address, so a reload (or a link) shows the same import.
  const [params, setParams] = useSearchParams();
  const jobId = params.get('job');
  const [file, setFile] = useState<File | null>(null);
  const inputId = useId();
  const upload = useMutation({
    mutationFn: (f: File) => {
      const form = new FormData();
      form.append('file', f);
      return api<{ jobId: string }>('/contacts/import', { method: 'POST', form });
    },
    onSuccess: ({ jobId: id }) => setParams({ job: id }),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (file) upload.mutate(file);
  };
  return (
    <>
      <title>Import contacts · Tidings</title>
      <p>
        <Link to={`/p/${projectId}/contacts`}>← All contacts</Link>
      </p>
      <PageHeader title="Import contacts" description="Add or update contacts from a CSV file." />
      <section className="card" aria-labelledby="upload-heading">
        <h2 id="upload-heading">Upload a CSV file</h2>
        <ul className="muted">
          <li>
            A header row with an <code>email</code> column; every other column becomes a data field of that name.
          </li>
          <li>UTF-8, at most 5 MB. A contact that exists is updated: empty cells leave its values as they are.</li>
          <li>Numbers, true/false and dates are recognised; rows without a valid email are skipped and listed.</li>
        </ul>
        <form onSubmit={submit} className="dropzone">
          <div className="field">
            <label htmlFor={inputId}>CSV file</label>
            <input
              id={inputId}
              type="file"
              accept=".csv,text/csv"
              onChange={(e) => {
                setFile(e.target.files?.[0] ?? null);
                upload.reset();
              }}
            />
          </div>
          <ErrorNotice error={upload.error} />
          <div className="actions">
            <button type="submit" className="button-primary" disabled={!file || upload.isPending}>
              {upload.isPending ? 'Uploading…' : 'Import'}
            </button>
          </div>
        </form>
      </section>
      {jobId ? <ImportProgress key={jobId} projectId={projectId} jobId={jobId} /> : null}
    </>
  );
}

function ImportProgress({ projectId, jobId }: { projectId: string; jobId: string }) {
  const client = useQueryClient();
  const job = useQuery({
    queryKey: ['contacts-import', jobId],
    queryFn: () => api<ImportJob>(`/contacts/import/${encodeURIComponent(jobId)}`),
    refetchInterval: (query) => (finished(query.state.data) || query.state.error ? false : 500),
  });
  const heading = useRef<HTMLHeadingElement>(null);
  const done = finished(job.data);
  // New contacts and fields appear in the list once the job ends; focus moves to the outcome.
  useEffect(() => {
    if (!done) return;
    void client.invalidateQueries({ queryKey: ['contacts', projectId] });
    void client.invalidateQueries({ queryKey: ['contact-fields', projectId] });
    heading.current?.focus();
  }, [done, client, projectId]);

  const data = job.data;
  return (
    <section className="card" aria-labelledby="job-heading">
      <h2 id="job-heading" ref={heading} tabIndex={-1}>
        {!data ? 'Import' : data.status === 'completed' ? 'Import complete' : data.status === 'failed' ? 'Import failed' : 'Importing…'}
      </h2>
      <ErrorNotice error={job.error} />
      {data ? (
        <>
          <ProgressBar
            value={data.status === 'completed' ? Math.max(data.processedRows, 1) : data.processedRows}
            max={data.status === 'completed' ? Math.max(data.totalRows, 1) : data.totalRows}
            label={data.totalRows ? `${data.processedRows.toLocaleString()} of ${data.totalRows.toLocaleString()} rows` : 'Reading the file'}
          />
          {data.status === 'failed' ? (
            <div role="alert" className="notice notice-error">
              <p>{data.reason ?? 'The file could not be imported.'}</p>
            </div>
          ) : null}
          <div role="status">
            {data.status === 'completed' ? (
              <ul className="outcome">
                <li>
                  <strong>{data.imported.toLocaleString()}</strong> new
                </li>
                <li>
                  <strong>{data.updated.toLocaleString()}</strong> updated
                </li>
                <li>
                  <strong>{data.skipped.toLocaleString()}</strong> skipped
                </li>
              </ul>
            ) : data.status === 'queued' ? (
              <p className="muted">Waiting for the worker…</p>
            ) : null}
          </div>
          <p className="muted">Started {formatDate(data.createdAt)}</p>
          {data.errors.length ? (
            <>
              <h3>Rows not imported</h3>
              <TableScroll label="Rows not imported">
                <table>
                  <caption className="visually-hidden">Rows not imported</caption>
                  <thead>
                    <tr>
                      <th scope="col">Row</th>
                      <th scope="col">Email</th>
                      <th scope="col">Problem</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.errors.map((e) => (
                      <tr key={e.row}>
                        <td>{e.row}</td>
                        <td className="email-cell">{e.email || <span className="muted">(empty)</span>}</td>
                        <td>{REASONS[e.reason] ?? e.reason}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableScroll>
            </>
          ) : null}
          {data.status === 'completed' ? (
            <p>
              <Link to={`/p/${projectId}/contacts`}>See the contacts</Link>
            </p>
          ) : null}
        </>
      ) : null}
    </section>
  );
}
