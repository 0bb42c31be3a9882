import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api } from '../../api/client';
import type { Contact } from '../../api/contacts';
import { useProject } from '../../app/project';
import { formatDate } from '../../components/format';
import { StatusBadge } from './badges';
import { stepTitle } from './JourneyCanvas';
import { STEP_LABELS } from './stepTypes';
import type { Execution, JourneyDetail, StepType } from './types';

/** One execution: where it is, why it ended, its steps in order, and where Temporal shows it. */
export function ExecutionDetail({ journey, execution }: { journey: JourneyDetail; execution: Execution }) {
  const { projectId } = useProject();
  const contact = useQuery({
    queryKey: ['contact', execution.contactId],
    queryFn: () => api<Contact>(`/contacts/${execution.contactId}`),
    staleTime: 60_000,
  });
  const byId = new Map(journey.steps.map((s) => [s.id, s]));
  const current = execution.currentStepId ? byId.get(execution.currentStepId) : undefined;
  const url = execution.temporal?.url;
  return (
    <div className="execution-detail">
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <StatusBadge status={execution.status} />
          {execution.test ? <> <span className="badge">test run · {execution.timeScale}×</span></> : null}
        </dd>
        <dt>Contact</dt>
        <dd>
          <Link to={`/p/${projectId}/contacts/${execution.contactId}`}>{contact.data?.email ?? execution.contactId}</Link>
        </dd>
        {current && (execution.status === 'RUNNING' || execution.status === 'WAITING') ? (
          <>
            <dt>Now at</dt>
            <dd>
              {stepTitle(current)}
              {execution.waitingForEvent ? (
                <>
                  {' '}
                  (waiting for <code>{execution.waitingForEvent}</code>)
                </>
              ) : null}
            </dd>
          </>
        ) : null}
        <dt>Started</dt>
        <dd>{formatDate(execution.startedAt)}</dd>
        {execution.finishedAt ? (
          <>
            <dt>Ended</dt>
            <dd>{formatDate(execution.finishedAt)}</dd>
          </>
        ) : null}
        {execution.exitReason ? (
          <>
            <dt>Exit reason</dt>
            <dd>{execution.exitReason}</dd>
          </>
        ) : null}
      </dl>
      {execution.error ? (
        <div className="notice notice-error">
          <p>{execution.error}</p>
        </div>
      ) : null}
      {url ? (
        <p>
          <a href={url} target="_blank" rel="noreferrer">
            Open in Temporal Web UI
          </a>
        </p>
      ) : null}
      <h3>Steps</h3>
      {execution.steps && execution.steps.length > 0 ? (
        <ol className="execution-steps">
          {[...execution.steps]
            .sort((a, b) => a.seq - b.seq)
            .map((s) => {
              const step = byId.get(s.stepId);
              return (
                <li key={s.seq}>
                  <span className="execution-step-name">{step ? stepTitle(step) : STEP_LABELS[s.stepType as StepType] ?? s.stepType}</span>{' '}
                  <StatusBadge status={s.status} />
                  {s.branch ? <> <span className="badge">{s.branch}</span></> : null}
                  <span className="muted small"> {formatDate(s.startedAt)}</span>
                  {s.error ? <p className="field-error">{s.error}</p> : null}
                </li>
              );
            })}
        </ol>
      ) : (
        <p className="muted">No step has started yet.</p>
      )}
    </div>
  );
}
