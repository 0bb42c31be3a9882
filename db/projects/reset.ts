import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound, validationError } from '../../errors';
import { carryOverConsumption } from '../billing/allowance';
import { finishExecution } from '../journeys/executions';
import { query, queryOne } from '../sql';

/** What stopping a project's running work needs from Temporal (api/use-cases/projects.ts builds it from the workflows' lifecycles). */
export interface ProjectRunner {
  cancelJourney(executionId: string): Promise<void>;
  cancelCampaign(campaignId: string): Promise<void>;
}

/** Temporal calls in flight at once while stopping a project's executions. */
const CANCEL_CONCURRENCY = 16;

/**
 * Cancels the project's running and waiting journey executions (Temporal first, then CANCELLED in
 * the row) and its SCHEDULED / SENDING campaigns (CANCELLED in the row, then the workflow, as
 * POST /campaigns/:id/cancel does; a batch in flight also stops on its own when it next reads the
 * status).
 */
export async function stopProjectWork(em: EntityManager, projectId: string, runner: ProjectRunner): Promise<{ executions: number; campaigns: number }> {
  const executions = await query<{ id: string }>(
    em,
    `select id from workflow_executions where project_id = ? and status in ('RUNNING','WAITING')`,
    [projectId],
  );
  for (let i = 0; i < executions.length; i += CANCEL_CONCURRENCY) {
    await Promise.all(
      executions.slice(i, i + CANCEL_CONCURRENCY).map(async ({ id }) => {
        await runner.cancelJourney(id);
        await finishExecution(em, { executionId: id, status: 'CANCELLED' });
      }),
    );
  }
  const campaigns = await em.transactional(async (tx) => {
    const rows = await query<{ id: string }>(
      tx,
      `update campaigns set status = 'CANCELLED', cancelled_at = now(), updated_at = now()
       where project_id = ? and status in ('SCHEDULED','SENDING') returning id`,
      [projectId],
    );
    for (const { id } of rows) await runner.cancelCampaign(id);
    return rows.length;
  });
  return { executions: executions.length, campaigns };
}

/** What a reset removed, per kind. */
export interface ResetSummary {
  cancelled: { executions: number; campaigns: number };
  deleted: Record<(typeof WIPED)[number][0], number>;
}

/**
 * The project's data, in delete order (largest per-project tables first, by their project index;
 * the cascades then find little left). Kept on purpose: the project, its keys, members, domains
 * (with their DKIM keys: DNS stays valid), the suppression list (addresses that bounced or
 * complained stay protected), suspensions, billing settings, uploads and the send throttle. The
 * deleted emails' consumption is carried over first (db/billing/allowance.ts): a reset does not refill a cap.
 */
const WIPED = [
  ['events', 'events'],
  ['emails', 'emails'],
  ['attachmentSets', 'attachment_sets'],
  ['executions', 'workflow_executions'],
  ['campaigns', 'campaigns'],
  ['segments', 'segments'],
  ['workflows', 'workflows'],
  ['contacts', 'contacts'],
  ['fields', 'contact_fields'],
  ['fieldTombstones', 'contact_field_tombstones'],
  ['templates', 'templates'],
  ['imports', 'import_jobs'],
  ['bulkJobs', 'bulk_jobs'],
  ['idempotencyKeys', 'idempotency_keys'],
] as const;

/**
 * POST /users/@me/projects/:id/reset: irreversible. `confirm` must be the project's exact name.
 * Running work is stopped first; then every table above loses the project's rows in one
 * transaction, so a failure leaves the project as it was. A running import or bulk job stops at
 * its next chunk (it finds its job row gone and applies nothing).
 */
export async function resetProject(em: EntityManager, projectId: string, confirm: string, runner: ProjectRunner): Promise<ResetSummary> {
  const project = await queryOne<{ name: string }>(em, 'select name from projects where id = ?', [projectId]);
  if (!project) throw notFound('project');
  if (confirm !== project.name) {
    throw validationError(
      [{ field: 'confirm', message: "Must be the project's exact name", code: 'confirmation_mismatch' }],
      "The confirmation does not match the project's name; nothing was deleted",
    );
  }
  const cancelled = await stopProjectWork(em, projectId, runner);
  const deleted = await em.transactional(async (tx) => {
    await carryOverConsumption(tx, projectId);
    const counts = {} as ResetSummary['deleted'];
    for (const [key, table] of WIPED) {
      const row = await queryOne<{ n: number }>(
        tx,
        `with gone as (delete from ${table} where project_id = ? returning 1) select count(*)::int as n from gone`,
        [projectId],
      );
      counts[key] = row?.n ?? 0;
    }
    return counts;
  });
  return { cancelled, deleted };
}
