import type { Template } from '../../api/templates';
import { Connections } from './Connections';
import { StepConfigForm } from './StepConfigForm';
import { ownProblem, STEP_HINTS, STEP_LABELS } from './stepTypes';
import type { Branch, GraphProblems, JourneyDetail, Step, UserStepType } from './types';

/** The selected step: its config form, its connections, and deleting it. */
export function StepPanel({
  journey,
  step,
  templates,
  busy,
  problems,
  onProblems,
  onConnect,
  onRemove,
}: {
  journey: JourneyDetail;
  step: Step;
  templates: ReadonlyArray<Template>;
  busy: boolean;
  problems: string[];
  onProblems: (problems: GraphProblems) => void;
  onConnect: (toStepId: string, branch: Branch | null) => void;
  onRemove: (stepIds: string[], transitionIds: string[], splice?: boolean) => void;
}) {
  const out = journey.transitions.filter((t) => t.fromStepId === step.id && t.toStepId !== step.id).length;
  const into = journey.transitions.filter((t) => t.toStepId === step.id && t.fromStepId !== step.id).length;
  return (
    <div className="step-panel">
      <h2>
        {STEP_LABELS[step.type]} step{step.name ? `: ${step.name}` : ''}
      </h2>
      <p className="muted small">
        {STEP_HINTS[step.type as UserStepType]} · <code>{step.id}</code>
      </p>
      {problems.length > 0 ? (
        <div className="notice notice-error">
          {problems.map((p) => (
            <p key={p}>{ownProblem(p, step.id)}</p>
          ))}
        </div>
      ) : null}
      <StepConfigForm key={step.id} journey={journey} step={step} templates={templates} onProblems={onProblems} />
      <Connections
        key={`c-${step.id}`}
        journey={journey}
        step={step}
        busy={busy}
        onConnect={onConnect}
        onRemove={(transitionId) => onRemove([], [transitionId])}
      />
      <section aria-labelledby={`delete-${step.id}`} className="danger-zone">
        <h3 id={`delete-${step.id}`}>Delete</h3>
        <div className="actions">
          {out === 1 && into > 0 ? (
            <button type="button" className="button-small" disabled={busy} onClick={() => onRemove([step.id], [], true)}>
              Delete and reconnect around it
            </button>
          ) : null}
          <button type="button" className="button-small button-danger" disabled={busy} onClick={() => onRemove([step.id], [], false)}>
            Delete step
          </button>
        </div>
      </section>
    </div>
  );
}
