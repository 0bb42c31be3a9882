import {
  applyNodeChanges,
  Background,
  type Connection,
  Controls,
  type Edge,
  type EdgeChange,
  MarkerType,
  type NodeChange,
  type OnBeforeDelete,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
} from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import { type DragEvent, type RefObject, useCallback, useMemo, useRef, useState } from 'react';
import { layoutJourney, type Point } from './layout';
import type { ExecutionPath } from './path';
import { forgetPositions, loadPositions, savePositions } from './positions';
import { nodeTypes, type StepFlowNode, type StepRunState } from './StepNode';
import { branchOfHandle, sourceHandleOf, STEP_LABELS, summarize } from './stepTypes';
import type { Template } from '../../api/templates';
import type { Branch, GraphProblems, JourneyDetail, Step, UserStepType } from './types';

/** The drag payload of a palette item. */
export const STEP_DRAG_TYPE = 'application/x-tidings-step';
/** Half a node's width and height, so a dropped step lands centred on the pointer. */
const NODE_HALF = { x: 110, y: 40 };

export type Selection = { kind: 'step' | 'edge'; id: string } | null;

export interface CanvasProps {
  journey: JourneyDetail;
  templates: ReadonlyArray<Template>;
  selection: Selection;
  onSelect: (selection: Selection) => void;
  path: ExecutionPath | null;
  problems: GraphProblems | null;
  /** The positions shown, kept current for the page (to place steps added with the keyboard). */
  positionsRef: RefObject<Record<string, Point>>;
  onAddStep: (type: UserStepType, position: Point) => void;
  onConnect: (fromStepId: string, toStepId: string, branch: Branch | null) => void;
  onDelete: (steps: string[], transitions: string[]) => void;
}

export const stepTitle = (step: Pick<Step, 'type' | 'name'>) => step.name || STEP_LABELS[step.type];

export function JourneyCanvas(props: CanvasProps) {
  return (
    <ReactFlowProvider>
      <Canvas {...props} />
    </ReactFlowProvider>
  );
}

function runState(path: ExecutionPath | null, id: string): StepRunState {
  if (!path) return null;
  if (path.failed.has(id)) return 'failed';
  if (path.current === id) return 'current';
  return path.visited.has(id) ? 'visited' : 'unvisited';
}

interface NodeState {
  position?: Point;
  measured?: StepFlowNode['measured'];
  dragging?: boolean;
}

function Canvas({ journey, templates, selection, onSelect, path, problems, positionsRef, onAddStep, onConnect, onDelete }: CanvasProps) {
  const flow = useReactFlow();
  const wrapper = useRef<HTMLDivElement>(null);
  // Decided once: a new journey (its trigger alone) starts at the top, with room below to build down.
  const [fresh] = useState(journey.steps.length === 1);
  const [nodeState, setNodeState] = useState<Record<string, NodeState>>({});
  const entryStepId = journey.steps.find((s) => s.type === 'TRIGGER')?.id;
  const layout = useMemo(
    () => layoutJourney({ steps: journey.steps, transitions: journey.transitions, entryStepId }),
    [journey.steps, journey.transitions, entryStepId],
  );
  // Read again whenever the steps change: a step just added had its position saved before it arrived.
  const [arranged, setArranged] = useState(0);
  const stored = useMemo(() => loadPositions(journey.id), [journey.id, journey.steps, arranged]);

  const nodes: StepFlowNode[] = useMemo(
    () =>
      journey.steps.map((step) => {
        const state = nodeState[step.id];
        const summary = summarize(step, { templates });
        const stepProblems = problems?.steps[step.id] ?? [];
        const run = runState(path, step.id);
        return {
          id: step.id,
          type: 'step',
          position: state?.position ?? stored[step.id] ?? layout[step.id] ?? { x: 0, y: 0 },
          measured: state?.measured,
          dragging: state?.dragging,
          selected: selection?.kind === 'step' && selection.id === step.id,
          deletable: step.type !== 'TRIGGER',
          data: { step, summary, problems: stepProblems, run },
          ariaLabel: [
            `${STEP_LABELS[step.type]} step${step.name ? ` "${step.name}"` : ''}: ${summary}`,
            run === 'current' ? 'the execution is here' : run === 'visited' ? 'visited' : run === 'failed' ? 'failed' : '',
            stepProblems.length > 0 ? `problem: ${stepProblems.join(' ')}` : '',
          ]
            .filter(Boolean)
            .join('; '),
        };
      }),
    [journey.steps, nodeState, stored, layout, selection, problems, path, templates],
  );
  positionsRef.current = Object.fromEntries(nodes.map((n) => [n.id, n.position]));

  const edges: Edge[] = useMemo(() => {
    const byId = new Map(journey.steps.map((s) => [s.id, s]));
    return journey.transitions.map((t) => {
      const from = byId.get(t.fromStepId);
      const to = byId.get(t.toStepId);
      const fromType = from?.type ?? 'DELAY';
      // A branch is labelled at its handle; only a wait's unlabelled transition (taken on both) says so on the edge.
      const label = !t.branch && fromType === 'WAIT_FOR_EVENT' ? 'event or timeout' : undefined;
      const taken = path?.taken.has(t.id) ?? false;
      const problem = problems?.transitions[t.id];
      const classes = [taken ? 'is-taken' : path ? 'is-dim' : '', problem ? 'has-problem' : ''].filter(Boolean).join(' ');
      return {
        id: t.id,
        source: t.fromStepId,
        target: t.toStepId,
        sourceHandle: sourceHandleOf(fromType, t.branch),
        targetHandle: 'in',
        label: problem ? `${label ?? ''} ⚠`.trim() : label,
        className: classes,
        animated: taken && path?.current === t.toStepId,
        selected: selection?.kind === 'edge' && selection.id === t.id,
        markerEnd: { type: MarkerType.ArrowClosed, width: 14, height: 14, markerUnits: 'userSpaceOnUse', color: taken ? '#1d4ed8' : problem ? '#b42318' : '#6b7280' },
        ariaLabel: `Connection from ${from ? stepTitle(from) : t.fromStepId} to ${to ? stepTitle(to) : t.toStepId}${t.branch ? ` (${t.branch})` : ''}${
          taken ? ', taken' : ''
        }${problem ? `; problem: ${problem.join(' ')}` : ''}`,
      };
    });
  }, [journey.steps, journey.transitions, path, problems, selection]);

  const onNodesChange = useCallback(
    (changes: NodeChange<StepFlowNode>[]) => {
      const next = applyNodeChanges(
        changes.filter((c) => c.type !== 'select' && c.type !== 'remove'),
        nodes,
      );
      setNodeState(Object.fromEntries(next.map((n) => [n.id, { position: n.position, measured: n.measured, dragging: n.dragging }])));
      const selects = changes.filter((c) => c.type === 'select');
      if (selects.length > 0) {
        const chosen = selects.filter((c) => c.selected).at(-1);
        if (chosen) onSelect({ kind: 'step', id: chosen.id });
        else if (selection?.kind === 'step' && selects.some((c) => c.id === selection.id)) onSelect(null);
      }
    },
    [nodes, onSelect, selection],
  );

  const onEdgesChange = useCallback(
    (changes: EdgeChange[]) => {
      const selects = changes.filter((c) => c.type === 'select');
      const chosen = selects.filter((c) => c.selected).at(-1);
      if (chosen) onSelect({ kind: 'edge', id: chosen.id });
      else if (selection?.kind === 'edge' && selects.some((c) => c.id === selection.id)) onSelect(null);
    },
    [onSelect, selection],
  );

  // The service does the deleting (a step with its transitions, spliced when it has one successor);
  // the canvas shows what the service then answers.
  const onBeforeDelete: OnBeforeDelete<StepFlowNode, Edge> = useCallback(
    async ({ nodes: doomed, edges: cut }) => {
      const stepIds = doomed.filter((n) => n.deletable !== false).map((n) => n.id);
      const gone = new Set(stepIds);
      const transitionIds = cut.filter((e) => !gone.has(e.source) && !gone.has(e.target)).map((e) => e.id);
      if (stepIds.length + transitionIds.length > 0) onDelete(stepIds, transitionIds);
      return false;
    },
    [onDelete],
  );

  const onDrop = useCallback(
    (event: DragEvent<HTMLDivElement>) => {
      const type = event.dataTransfer.getData(STEP_DRAG_TYPE) as UserStepType;
      if (!type) return;
      event.preventDefault();
      const point = flow.screenToFlowPosition({ x: event.clientX, y: event.clientY });
      onAddStep(type, { x: Math.round(point.x - NODE_HALF.x), y: Math.round(point.y - NODE_HALF.y) });
    },
    [flow, onAddStep],
  );

  return (
    <div className="journey-canvas-frame">
      <div className="canvas-toolbar">
        {path ? (
          <ul className="run-legend" aria-label="Legend">
            <li className="legend-visited">Done</li>
            <li className="legend-current">Here now</li>
            <li className="legend-unvisited">Not reached</li>
          </ul>
        ) : (
          <p className="muted small">Drag from a handle to a step to connect them.</p>
        )}
        <button
          type="button"
          className="button-small"
          onClick={() => {
            forgetPositions(journey.id);
            setArranged((n) => n + 1);
            setNodeState((state) => Object.fromEntries(Object.entries(state).map(([id, s]) => [id, { measured: s.measured }])));
            // Once the new positions are drawn, show them all.
            requestAnimationFrame(() => void flow.fitView({ padding: 0.2, maxZoom: 1 }));
          }}
        >
          Arrange automatically
        </button>
      </div>
      <div
        ref={wrapper}
        className="journey-canvas"
        onDragOver={(event) => {
          if (event.dataTransfer.types.includes(STEP_DRAG_TYPE)) {
            event.preventDefault();
            event.dataTransfer.dropEffect = 'copy';
          }
        }}
        onDrop={onDrop}
      >
        <ReactFlow
          aria-label="Journey graph"
          nodes={nodes}
          edges={edges}
          nodeTypes={nodeTypes}
          onNodesChange={onNodesChange}
          onEdgesChange={onEdgesChange}
          onConnect={(c: Connection) => c.source !== c.target && onConnect(c.source, c.target, branchOfHandle(c.sourceHandle))}
          isValidConnection={(c) => c.source !== c.target}
          onBeforeDelete={onBeforeDelete}
          onNodeDragStop={(_event, _node, moved) =>
            savePositions(journey.id, { ...positionsRef.current, ...Object.fromEntries(moved.map((n) => [n.id, n.position])) })
          }
          onPaneClick={() => onSelect(null)}
          deleteKeyCode={['Backspace', 'Delete']}
          minZoom={0.3}
          fitView={!fresh}
          fitViewOptions={{ padding: 0.2, maxZoom: 1 }}
          onInit={(instance) => {
            if (fresh) void instance.setViewport({ x: (wrapper.current?.clientWidth ?? 0) / 2 - NODE_HALF.x, y: 30, zoom: 1 });
          }}
          ariaLabelConfig={{
            'node.a11yDescription.default': 'Press Enter or Space to select this step and open its settings; Delete removes it; arrow keys move it.',
            'edge.a11yDescription.default': 'Press Enter or Space to select this connection; Delete removes it.',
            'handle.ariaLabel': 'Connection point: drag to another step to connect them',
            'controls.ariaLabel': 'Graph zoom',
          }}
        >
          <Background gap={20} />
          <Controls showInteractive={false} />
        </ReactFlow>
      </div>
    </div>
  );
}
