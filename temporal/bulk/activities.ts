import { Context } from '@temporalio/activity';
import {
  activeExecutionsOfChunk,
  applySubscriptionChunk,
  bulkJobPlan,
  type BulkJobStatus,
  deleteContactsChunk,
  setBulkJobStatus,
} from '../../db/contacts/bulk-jobs';
import { finishExecution } from '../../db/journeys/executions';
import type { Orm } from '../../db/orm';
import { workflowIds } from '../ids';

/** Stops a journey in Temporal; one already ended is nothing to stop. */
async function cancelJourney(executionId: string): Promise<void> {
  try {
    await Context.current().client.workflow.getHandle(workflowIds.journey(executionId)).cancel();
  } catch (err) {
    if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
  }
}

export function createBulkActivities({ orm }: { orm: Orm }) {
  return {
    async bulkJobStart(jobId: string) {
      const em = orm.em.fork();
      const plan = await bulkJobPlan(em, jobId);
      if (plan && plan.status === 'queued') await setBulkJobStatus(em, jobId, 'running');
      return plan;
    },

    async bulkJobFinish(jobId: string, status: Exclude<BulkJobStatus, 'queued' | 'running'>, error?: string): Promise<void> {
      await setBulkJobStatus(orm.em.fork(), jobId, status, error);
    },

    /** One chunk; a chunk already done (a retry after the commit) is skipped. Returns the next offset. */
    async bulkJobChunk(jobId: string, operation: string, offset: number, size: number): Promise<number> {
      const em = orm.em.fork();
      if (operation !== 'delete') return (await applySubscriptionChunk(em, jobId, offset, size)).nextOffset;
      // Cancelled first, as DELETE of an execution does: the journey stops and records CANCELLED;
      // then the rows go with their contacts.
      for (const executionId of await activeExecutionsOfChunk(em, jobId, offset, size)) {
        await cancelJourney(executionId);
        await finishExecution(em, { executionId, status: 'CANCELLED' });
      }
      const outcome = await deleteContactsChunk(em, jobId, offset, size);
      // Started between the cancel and the delete: its row is gone, its journey is stopped too.
      for (const executionId of outcome.lateExecutionIds) await cancelJourney(executionId);
      return outcome.nextOffset;
    },
  };
}

export type BulkActivities = ReturnType<typeof createBulkActivities>;
