import { STEP_DRAG_TYPE } from './JourneyCanvas';
import { STEP_HINTS, STEP_LABELS } from './stepTypes';
import { STEP_TYPES, type UserStepType } from './types';

/**
 * The step types, to drag onto the canvas (dropped where the pointer is) or to press (added below
 * the selected step, or below everything, and selected so the side panel can configure and connect it).
 */
export function Palette({ onAdd, busy }: { onAdd: (type: UserStepType) => void; busy: boolean }) {
  return (
    <section className="journey-palette" aria-labelledby="palette-title">
      <h2 id="palette-title">Add step</h2>
      <p className="muted">Drag a step onto the graph, or press it to add it below the selected step.</p>
      <ul>
        {STEP_TYPES.map((type) => (
          <li key={type}>
            <button
              type="button"
              draggable
              disabled={busy}
              className={`palette-item step-node-${type.toLowerCase().replace(/_/g, '-')}`}
              data-step-type={type}
              title={STEP_HINTS[type]}
              onDragStart={(event) => {
                event.dataTransfer.setData(STEP_DRAG_TYPE, type);
                event.dataTransfer.effectAllowed = 'copy';
              }}
              onClick={() => onAdd(type)}
            >
              <span className="palette-label">{STEP_LABELS[type]}</span>
              <span className="visually-hidden">: {STEP_HINTS[type]}</span>
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
