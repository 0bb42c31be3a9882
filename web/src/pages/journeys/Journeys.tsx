import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, type CursorPage } from '../../api/client';
import { useProject } from '../../app/project';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, fieldError, Loading, PageHeader, TextField } from '../../components/ui';
import { EnabledBadge } from './badges';
import { journeysKey } from './queries';
import { ReentryCheckbox, TriggerEventField } from './TriggerFields';
import type { Execution, Journey, JourneyDetail } from './types';
import './journeys.css';

/** The journeys of the project: what starts each, whether it is on, how often it ran; create and delete. */
export default function Journeys() {
  const { projectId } = useProject();
  const list = useCursorList<Journey>([...journeysKey, projectId], '/workflows', {});
  const [creating, setCreating] = useState(false);
  return (
    <>
      <PageHeader title="Journeys" description="Automations started by an event: send, wait, branch and update contacts.">
        <button type="button" className="button-primary" onClick={() => setCreating((c) => !c)} aria-expanded={creating}>
          New journey
        </button>
      </PageHeader>
      {creating ? <CreateJourney onCancel={() => setCreating(false)} /> : null}
      <ErrorNotice error={list.error} />
      {list.isPending ? (
        <Loading />
      ) : list.data && list.data.data.length === 0 && list.page === 1 ? (
        <EmptyState>No journeys yet. Create one to send a welcome series, a reminder, or anything an event should start.</EmptyState>
      ) : list.data ? (
        <>
          <TableScroll label="Journeys">
            <table>
              <caption className="visually-hidden">Journeys</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Trigger event</th>
                  <th scope="col">Status</th>
                  <th scope="col">Executions</th>
                  <th scope="col">Created</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((j) => (
                  <JourneyRow key={j.id} journey={j} projectId={projectId} />
                ))}
              </tbody>
            </table>
          </TableScroll>
          <CursorPager list={list} label="Journeys" />
        </>
      ) : null}
    </>
  );
}

function JourneyRow({ journey, projectId }: { journey: Journey; projectId: string }) {
  const client = useQueryClient();
  // The list carries no counts; the first page of executions does (its total).
  const executions = useQuery({
    queryKey: ['journey-executions', journey.id, 'count'],
    queryFn: async () => (await api<CursorPage<Execution>>(`/workflows/${journey.id}/executions`, { query: { limit: 1 } })).total,
  });
  const remove = useMutation({
    mutationFn: () => api(`/workflows/${journey.id}`, { method: 'DELETE' }),
    onSuccess: () => client.invalidateQueries({ queryKey: journeysKey }),
  });
  return (
    <tr>
      <td>
        <Link to={`/p/${projectId}/journeys/${journey.id}`}>{journey.name}</Link>
      </td>
      <td>
        <code>{journey.triggerConfig.eventName}</code>
      </td>
      <td>
        <EnabledBadge enabled={journey.enabled} />
      </td>
      <td>{executions.data === undefined ? '…' : executions.data.toLocaleString()}</td>
      <td>{formatDate(journey.createdAt)}</td>
      <td>
        <ConfirmDialog
          trigger={
            <button type="button" className="button-small button-danger" aria-label={`Delete ${journey.name}…`}>
              Delete…
            </button>
          }
          title={`Delete “${journey.name}”?`}
          description="Its steps and its finished executions are deleted with it. While executions are still running or waiting, the service refuses: cancel them or let them end first. This cannot be undone."
          confirmLabel="Delete journey"
          pendingLabel="Deleting…"
          onConfirm={() => remove.mutateAsync()}
        />
      </td>
    </tr>
  );
}

function CreateJourney({ onCancel }: { onCancel: () => void }) {
  const { projectId } = useProject();
  const navigate = useNavigate();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const [eventName, setEventName] = useState('');
  const [allowReentry, setAllowReentry] = useState(false);
  const create = useMutation({
    mutationFn: () => api<JourneyDetail>('/workflows', { method: 'POST', body: { name, eventName, allowReentry } }),
    onSuccess: (journey) => {
      void client.invalidateQueries({ queryKey: journeysKey });
      navigate(`/p/${projectId}/journeys/${journey.id}`);
    },
  });
  return (
    <form
      className="card"
      aria-label="New journey"
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate();
      }}
    >
      <h2>New journey</h2>
      <div className="grid-2">
        <TextField label="Name" value={name} onChange={(e) => setName(e.target.value)} required error={fieldError(create.error, 'name')} />
        <TriggerEventField value={eventName} onChange={setEventName} error={fieldError(create.error, 'eventName')} />
      </div>
      <ReentryCheckbox checked={allowReentry} onChange={setAllowReentry} />
      <ErrorNotice error={create.error} />
      <div className="actions">
        <button type="submit" className="button-primary" disabled={create.isPending}>
          Create and open the editor
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
