import { stepTitle } from './JourneyCanvas';
import type { JourneyDetail, Transition } from './types';

/** The selected connection: where it goes, on which branch, and removing it. */
export function EdgePanel({
  journey,
  transition,
  busy,
  problems,
  onRemove,
}: {
  journey: JourneyDetail;
  transition: Transition;
  busy: boolean;
  problems: string[];
  onRemove: () => void;
}) {
  const from = journey.steps.find((s) => s.id === transition.fromStepId);
  const to = journey.steps.find((s) => s.id === transition.toStepId);
  return (
    <div className="edge-panel">
      <h2>Connection</h2>
      <p>
        From <strong>{from ? stepTitle(from) : transition.fromStepId}</strong> to <strong>{to ? stepTitle(to) : transition.toStepId}</strong>
        {transition.branch ? (
          <>
            {' '}
            on <span className="badge">{transition.branch}</span>
          </>
        ) : null}
        .
      </p>
      {problems.length > 0 ? (
        <div className="notice notice-error">
          {problems.map((p) => (
            <p key={p}>{p}</p>
          ))}
        </div>
      ) : null}
      <button type="button" className="button-danger" disabled={busy} onClick={onRemove}>
        Remove connection
      </button>
    </div>
  );
}
