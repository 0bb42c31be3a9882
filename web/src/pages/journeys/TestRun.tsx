import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client';
import { ContactPicker, type ContactRef } from '../../components/ContactPicker';
import { ErrorNotice, fieldError, SelectField, TextArea, TextField } from '../../components/ui';
import { ExecutionDetail } from './ExecutionDetail';
import { useSystemEvents } from './queries';
import { type Execution, isActive, type JourneyDetail } from './types';

const SCALES = [
  { value: '1', label: 'Real time (1×)' },
  { value: '60', label: '1 minute → 1 second (60×)' },
  { value: '3600', label: '1 hour → 1 second (3600×)' },
  { value: '86400', label: '1 day → 1 second (86400×)' },
];

/**
 * A test run: the journey's real execution for a chosen contact, its delays and timeouts divided
 * by a time scale, drawn on the graph as it goes; the events its waits need can be simulated here.
 */
export function TestRun({
  journey,
  run,
  onStarted,
}: {
  journey: JourneyDetail;
  run: Execution | undefined;
  onStarted: (execution: Execution) => void;
}) {
  const [contact, setContact] = useState<ContactRef | null>(null);
  const [scale, setScale] = useState('60');
  const [customScale, setCustomScale] = useState('600');
  const timeScale = scale === 'custom' ? Number(customScale) : Number(scale);
  const start = useMutation({
    mutationFn: () => api<Execution>(`/workflows/${journey.id}/test-runs`, { method: 'POST', body: { contactId: contact?.id, timeScale } }),
    onSuccess: onStarted,
  });
  const running = run !== undefined && isActive(run.status);

  return (
    <div className="test-run">
      <p className="muted small">
        Runs this journey for real (emails are sent, webhooks called) for one contact, with time compressed, whether the journey is enabled or not.
      </p>
      <form
        aria-label="Start a test run"
        onSubmit={(event) => {
          event.preventDefault();
          if (contact) start.mutate();
        }}
      >
        <ContactPicker
          label="Find a contact by email"
          value={contact}
          onChange={setContact}
          chosenPrefix="Runs for"
          none="Choose the contact to run it for."
          error={fieldError(start.error, 'contactId')}
        />
        <SelectField label="Time scale" value={scale} onChange={(e) => setScale(e.target.value)} error={fieldError(start.error, 'timeScale')}>
          {SCALES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
          <option value="custom">Another factor…</option>
        </SelectField>
        {scale === 'custom' ? (
          <TextField
            label="Factor"
            hint="Every delay and timeout is divided by this (1 to 86400)"
            type="number"
            min={1}
            max={86400}
            value={customScale}
            onChange={(e) => setCustomScale(e.target.value)}
          />
        ) : null}
        <ErrorNotice error={start.error} />
        <div className="actions">
          <button type="submit" className="button-primary" disabled={!contact || start.isPending || running}>
            Start test run{contact ? ` for ${contact.email}` : ''}
          </button>
        </div>
      </form>
      {run ? (
        <section aria-label="Test run" className="test-run-status">
          <h3>Test run</h3>
          <p role="status" className="muted">
            {running ? (run.waitingForEvent ? `Waiting for ${run.waitingForEvent}…` : 'Running…') : `Ended: ${run.status.toLowerCase()}.`}
          </p>
          {running ? <SimulateEvent journey={journey} run={run} /> : null}
          {running ? <CancelRun journey={journey} run={run} /> : null}
          <ExecutionDetail journey={journey} execution={run} />
        </section>
      ) : null}
    </div>
  );
}

/** The events this run may be waiting for: the journey's own waits first, then the service's events. */
function SimulateEvent({ journey, run }: { journey: JourneyDetail; run: Execution }) {
  const system = useSystemEvents();
  const waits = [...new Set(journey.steps.filter((s) => s.type === 'WAIT_FOR_EVENT').map((s) => String(s.config.eventName)))];
  const service = (system.data ?? []).map((e) => e.name).filter((n) => !n.includes('<') && !waits.includes(n));
  // Until the user picks one, the event offered is the one the run waits for now.
  const [picked, setPicked] = useState<string | null>(null);
  const [data, setData] = useState('');
  const chosen = picked ?? run.waitingForEvent ?? waits[0] ?? '';
  const send = useMutation({
    mutationFn: (name: string) => {
      let parsed: unknown;
      if (data.trim()) {
        try {
          parsed = JSON.parse(data);
        } catch (err) {
          throw new Error(`The event data is not valid JSON: ${(err as Error).message}`);
        }
      }
      return api<{ delivered: boolean }>(`/workflows/${journey.id}/executions/${run.id}/events`, {
        method: 'POST',
        body: { event: name, ...(parsed !== undefined ? { data: parsed } : {}) },
      });
    },
  });
  return (
    <form
      className="simulate"
      aria-label="Simulate an event"
      onSubmit={(e) => {
        e.preventDefault();
        if (chosen) send.mutate(chosen);
      }}
    >
      <SelectField label="Event to simulate" value={chosen} onChange={(e) => setPicked(e.target.value)}>
        {waits.length > 0 ? (
          <optgroup label="Waited for in this journey">
            {waits.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </optgroup>
        ) : null}
        <optgroup label="Recorded by the service">
          {service.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </optgroup>
      </SelectField>
      <TextArea label="Event data (JSON, optional)" value={data} rows={2} onChange={(e) => setData(e.target.value)} spellCheck={false} />
      <ErrorNotice error={send.error} />
      {send.data ? (
        <p role="status" className={`notice ${send.data.delivered ? 'notice-ok' : ''}`}>
          {send.data.delivered ? `Sent ${send.variables} to the run.` : 'The run had already ended; nothing was delivered.'}
        </p>
      ) : null}
      <button type="submit" disabled={!chosen || send.isPending}>
        Send event
      </button>
    </form>
  );
}

function CancelRun({ journey, run }: { journey: JourneyDetail; run: Execution }) {
  const cancel = useMutation({ mutationFn: () => api(`/workflows/${journey.id}/executions/${run.id}`, { method: 'DELETE' }) });
  return (
    <div className="actions">
      <button type="button" className="button-small button-danger" onClick={() => cancel.mutate()} disabled={cancel.isPending}>
        Cancel test run
      </button>
      <ErrorNotice error={cancel.error} />
    </div>
  );
}
