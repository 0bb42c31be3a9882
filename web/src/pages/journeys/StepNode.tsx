import { Handle, type Node, type NodeProps, Position } from '@xyflow/react';
import { memo } from 'react';
import { BRANCH_HANDLES, ownProblem, STEP_LABELS } from './stepTypes';
import type { Step } from './types';

/** Where an execution shown on the graph stands with a step. */
export type StepRunState = 'visited' | 'current' | 'failed' | 'unvisited' | null;

export type StepNodeData = {
  step: Step;
  summary: string;
  problems: string[];
  run: StepRunState;
};

export type StepFlowNode = Node<StepNodeData, 'step'>;

const RUN_TEXT: Record<Exclude<StepRunState, null>, string> = {
  visited: 'Done',
  current: 'Here now',
  failed: 'Failed',
  unvisited: '',
};

/**
 * One step on the canvas: its type, its name, one line of its config, and its handles (an input
 * on top, its outputs below: `yes`/`no` for a condition, `event`/`timeout` for a wait).
 */
function StepNodeView({ data, selected }: NodeProps<StepFlowNode>) {
  const { step, summary, problems, run } = data;
  const branches = BRANCH_HANDLES[step.type];
  const classes = ['step-node', `step-node-${step.type.toLowerCase().replace(/_/g, '-')}`];
  if (selected) classes.push('is-selected');
  if (problems.length > 0) classes.push('has-problem');
  if (run) classes.push(`run-${run}`);
  return (
    <div className={classes.join(' ')}>
      {step.type !== 'TRIGGER' ? <Handle type="target" position={Position.Top} id="in" /> : null}
      <div className="step-node-head">
        <span className="step-node-type">{STEP_LABELS[step.type]}</span>
        {run && RUN_TEXT[run] ? <span className={`step-node-run run-${run}`}>{RUN_TEXT[run]}</span> : null}
      </div>
      {step.name ? <div className="step-node-name">{step.name}</div> : null}
      <div className="step-node-summary" title={summary}>
        {summary}
      </div>
      {problems.length > 0 ? (
        <ul className="step-node-problems" title={problems.join('\n')}>
          {problems.map((p) => (
            <li key={p}>{ownProblem(p, step.id)}</li>
          ))}
        </ul>
      ) : null}
      {branches ? (
        branches.map((branch, i) => {
          const left = `${25 + i * 50}%`;
          return (
            <div key={branch}>
              <Handle type="source" position={Position.Bottom} id={branch} style={{ left }} className={`handle-${branch}`} />
              <span className="step-node-branch" style={{ left }} aria-hidden="true">
                {branch}
              </span>
            </div>
          );
        })
      ) : step.type !== 'EXIT' ? (
        <Handle type="source" position={Position.Bottom} id="next" />
      ) : null}
    </div>
  );
}

export const StepNode = memo(StepNodeView);
export const nodeTypes = { step: StepNode };
