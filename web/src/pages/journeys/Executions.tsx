import { useState } from 'react';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { EmptyState, ErrorNotice, Loading, SelectField } from '../../components/ui';
import { StatusBadge } from './badges';
import { ExecutionDetail } from './ExecutionDetail';
import { executionsKey } from './queries';
import { EXECUTION_STATUSES, type Execution, type JourneyDetail } from './types';

/** The journey's executions, newest first, by status and kind; the one chosen is drawn on the graph. */
export function Executions({
  journey,
  selectedId,
  selected,
  onSelect,
}: {
  journey: JourneyDetail;
  selectedId: string | null;
  selected: Execution | undefined;
  onSelect: (id: string | null) => void;
}) {
  const [status, setStatus] = useState('');
  const [kind, setKind] = useState('');
  const list = useCursorList<Execution>(executionsKey(journey.id), `/workflows/${journey.id}/executions`, {
    status: status || undefined,
    test: kind || undefined,
    limit: 10,
  });
  return (
    <div className="executions">
      <div className="field-row">
        <SelectField
          label="Status"
          value={status}
          onChange={(e) => {
            setStatus(e.target.value);
            list.reset();
          }}
        >
          <option value="">Any status</option>
          {EXECUTION_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.toLowerCase()}
            </option>
          ))}
        </SelectField>
        <SelectField
          label="Kind"
          value={kind}
          onChange={(e) => {
            setKind(e.target.value);
            list.reset();
          }}
        >
          <option value="">All</option>
          <option value="false">Real executions</option>
          <option value="true">Test runs</option>
        </SelectField>
      </div>
      <div className="actions">
        <button type="button" className="button-small" onClick={() => void list.refetch()} disabled={list.isFetching}>
          Refresh
        </button>
      </div>
      <ErrorNotice error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data && list.data.data.length === 0 ? (
        <EmptyState>No executions{status ? ` ${status.toLowerCase()}` : ''} yet.</EmptyState>
      ) : list.data ? (
        <>
          <ul className="execution-list" aria-label="Executions">
            {list.data.data.map((e) => (
              <li key={e.id}>
                <button
                  type="button"
                  className={`execution-item${e.id === selectedId ? ' is-selected' : ''}`}
                  aria-pressed={e.id === selectedId}
                  onClick={() => onSelect(e.id === selectedId ? null : e.id)}
                >
                  <StatusBadge status={e.status} />
                  {e.test ? <span className="badge">test</span> : null}
                  <span className="execution-when">{formatDate(e.startedAt)}</span>
                  <span className="muted small execution-contact">{e.contactId}</span>
                </button>
              </li>
            ))}
          </ul>
          <CursorPager list={list} label="Executions" />
        </>
      ) : null}
      {selectedId ? (
        <section aria-label="Selected execution" className="execution-selected">
          <h3>Execution</h3>
          {selected ? <ExecutionDetail journey={journey} execution={selected} /> : <Loading />}
        </section>
      ) : (
        <p className="muted">Choose an execution to draw its path on the graph.</p>
      )}
    </div>
  );
}
