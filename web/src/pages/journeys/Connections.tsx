import { useState } from 'react';
import { SelectField } from '../../components/ui';
import { stepTitle } from './JourneyCanvas';
import { BRANCH_HANDLES, STEP_LABELS } from './stepTypes';
import type { Branch, JourneyDetail, Step } from './types';

const BRANCH_TEXT: Record<string, string> = {
  yes: 'yes',
  no: 'no',
  event: 'on the event',
  timeout: 'on timeout',
};

/**
 * A step's outgoing transitions, and a form to add one: the keyboard's way to connect steps
 * (the canvas does the same by dragging from a handle to another step).
 */
export function Connections({
  journey,
  step,
  busy,
  onConnect,
  onRemove,
}: {
  journey: JourneyDetail;
  step: Step;
  busy: boolean;
  onConnect: (toStepId: string, branch: Branch | null) => void;
  onRemove: (transitionId: string) => void;
}) {
  const branches = BRANCH_HANDLES[step.type];
  const outgoing = journey.transitions.filter((t) => t.fromStepId === step.id);
  const targets = journey.steps.filter((s) => s.type !== 'TRIGGER' && s.id !== step.id);
  const byId = new Map(journey.steps.map((s) => [s.id, s]));
  const [branch, setBranch] = useState<string>(branches?.[0] ?? '');
  const [target, setTarget] = useState('');
  if (step.type === 'EXIT') return <p className="muted">An exit step ends the journey; nothing follows it.</p>;
  return (
    <section aria-labelledby={`connections-${step.id}`} className="connections">
      <h3 id={`connections-${step.id}`}>Next steps</h3>
      {outgoing.length === 0 ? (
        <p className="muted">Not connected yet.</p>
      ) : (
        <ul className="connection-list">
          {outgoing.map((t) => {
            const to = byId.get(t.toStepId);
            return (
              <li key={t.id}>
                <span>
                  <span className="badge">{t.branch ? BRANCH_TEXT[t.branch] : step.type === 'WAIT_FOR_EVENT' ? 'on the event or timeout' : 'next'}</span> →{' '}
                  {to ? stepTitle(to) : t.toStepId}
                </span>
                <button
                  type="button"
                  className="button-small"
                  disabled={busy}
                  onClick={() => onRemove(t.id)}
                  aria-label={`Remove the connection to ${to ? stepTitle(to) : t.toStepId}${t.branch ? ` (${t.branch})` : ''}`}
                >
                  Remove
                </button>
              </li>
            );
          })}
        </ul>
      )}
      {targets.length > 0 ? (
        <form
          className="connect-form"
          aria-label="Connect to a step"
          onSubmit={(event) => {
            event.preventDefault();
            if (target) onConnect(target, (branch || null) as Branch | null);
          }}
        >
          {branches ? (
            <SelectField label="Branch" value={branch} onChange={(e) => setBranch(e.target.value)}>
              {branches.map((b) => (
                <option key={b} value={b}>
                  {BRANCH_TEXT[b]}
                </option>
              ))}
              {step.type === 'WAIT_FOR_EVENT' ? <option value="">on the event or timeout</option> : null}
            </SelectField>
          ) : null}
          <SelectField label="Connect to" value={target} onChange={(e) => setTarget(e.target.value)}>
            <option value="">Choose a step</option>
            {targets.map((s) => (
              <option key={s.id} value={s.id}>
                {stepTitle(s)}
                {s.name ? ` (${STEP_LABELS[s.type]})` : ''} · {s.id.slice(-6)}
              </option>
            ))}
          </SelectField>
          <button type="submit" disabled={busy || !target}>
            Connect
          </button>
        </form>
      ) : null}
    </section>
  );
}
