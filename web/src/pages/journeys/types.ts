/** The shapes of the `/workflows` endpoints (api/schemas/journeys.ts, api/schemas/executions.ts). */

export const STEP_TYPES = ['SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type UserStepType = (typeof STEP_TYPES)[number];
export type StepType = UserStepType | 'TRIGGER';
export type Branch = 'yes' | 'no' | 'event' | 'timeout';

export interface Journey {
  id: string;
  name: string;
  description: string | null;
  triggerType: 'EVENT';
  triggerConfig: { eventName: string };
  enabled: boolean;
  allowReentry: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface Step {
  id: string;
  type: StepType;
  name: string | null;
  config: Record<string, unknown>;
}

export interface Transition {
  id: string;
  fromStepId: string;
  toStepId: string;
  branch: Branch | null;
}

export interface JourneyDetail extends Journey {
  steps: Step[];
  transitions: Transition[];
}

export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
export const isActive = (status: ExecutionStatus) => status === 'RUNNING' || status === 'WAITING';

export interface ExecutionStep {
  seq: number;
  stepId: string;
  stepType: string;
  status: 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
  branch: string | null;
  output: unknown;
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
}

export interface Execution {
  id: string;
  workflowId: string;
  contactId: string;
  status: ExecutionStatus;
  currentStepId: string | null;
  waitingForEvent: string | null;
  context: Record<string, unknown>;
  exitReason: string | null;
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
  steps?: ExecutionStep[];
  /** Test runs (POST /workflows/:id/test-runs) say so, with their time scale. */
  test?: boolean;
  timeScale?: number;
  /** Where the execution is in Temporal; `url` is null when no Web UI is configured. */
  temporal?: { workflowId: string; runId: string | null; url: string | null } | null;
}

export interface SystemEvent {
  name: string;
  description: string;
  data: Record<string, string>;
}

/** The problems the service found in a graph, by where they are: its 422 names `steps.<id>`, `transitions.<id>` or `graph`. */
export interface GraphProblems {
  steps: Record<string, string[]>;
  transitions: Record<string, string[]>;
  graph: string[];
}
