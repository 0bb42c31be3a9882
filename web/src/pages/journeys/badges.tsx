import type { ExecutionStatus } from './types';

/** Whether a journey starts for new events (the list and the editor). */
export function EnabledBadge({ enabled }: { enabled: boolean }) {
  return <span className={enabled ? 'badge badge-ok' : 'badge'}>{enabled ? 'Enabled' : 'Disabled'}</span>;
}

const STATUS_CLASS: Record<string, string> = {
  COMPLETED: 'badge-ok',
  EXITED: 'badge-ok',
  FAILED: 'badge-danger',
  RUNNING: 'badge-active',
  WAITING: 'badge-active',
};

/** Where an execution, or one of its steps, stands. */
export function StatusBadge({ status }: { status: ExecutionStatus | string }) {
  return <span className={`badge ${STATUS_CLASS[status] ?? ''}`}>{status.toLowerCase()}</span>;
}
