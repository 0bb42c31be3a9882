import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import type { JsonValue } from '../entities/contact';
import { newId } from '../ids';
import { type CursorPage, keysetPage } from '../paging';
import { query, queryOne, transaction } from '../sql';

export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
export const ACTIVE_STATUSES: readonly ExecutionStatus[] = ['RUNNING', 'WAITING'];

export interface ExecutionStepDto {
  seq: number;
  stepId: string;
  stepType: string;
  status: 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
  branch: string | null;
  output: JsonValue | null;
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
}

export interface ExecutionDto {
  id: string;
  workflowId: string;
  contactId: string;
  status: ExecutionStatus;
  currentStepId: string | null;
  waitingForEvent: string | null;
  context: Record<string, JsonValue>;
  exitReason: string | null;
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
  /** A test run (POST /workflows/:id/test-runs): not an entry of its contact, and left out of the activity counts. */
  test: boolean;
  /** What its timers are divided by: a test run's timeScale, 1 for every other execution. */
  timeScale: number;
  /** The run of its Temporal workflow, when the API started it; null for the trigger dispatcher's starts. */
  temporalRunId: string | null;
  steps?: ExecutionStepDto[];
}

interface ExecutionRow {
  id: string;
  workflow_id: string;
  contact_id: string;
  status: ExecutionStatus;
  current_step_id: string | null;
  waiting_for_event: string | null;
  context: Record<string, JsonValue>;
  exit_reason: string | null;
  error: string | null;
  started_at: Date;
  finished_at: Date | null;
  test: boolean;
  time_scale: number;
  temporal_run_id: string | null;
}

const COLUMNS =
  'id, workflow_id, contact_id, status, current_step_id, waiting_for_event, context, exit_reason, error, started_at, finished_at, test, time_scale, temporal_run_id';
const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

const toDto = (r: ExecutionRow): ExecutionDto => ({
  id: r.id,
  workflowId: r.workflow_id,
  contactId: r.contact_id,
  status: r.status,
  currentStepId: r.current_step_id,
  waitingForEvent: r.waiting_for_event,
  context: r.context,
  exitReason: r.exit_reason,
  error: r.error,
  startedAt: new Date(r.started_at).toISOString(),
  finishedAt: iso(r.finished_at),
  test: r.test,
  timeScale: Number(r.time_scale),
  temporalRunId: r.temporal_run_id,
});

/**
 * Claims an entry of a contact into a journey, enforced in Postgres: without re-entry a contact
 * enters once, ever (workflow_entries); with it, only while no execution of it is active (a
 * partial unique index). Returns the execution id, or null when the contact may not enter.
 *
 * With `executionId` (derived from the event, db/events/trigger-outbox.ts executionIdFor) a claim that
 * already exists under that id is returned as it is: the caller is repeating a start that a crash
 * cut off between this claim and the Temporal workflow's start, and must start that same execution.
 */
export interface ExecutionClaim {
  projectId: string;
  journeyId: string;
  contactId: string;
  allowReentry: boolean;
  context: Record<string, JsonValue>;
  /** Derived from the event that starts it (executionIdFor); generated when absent. */
  executionId?: string;
  /** The email events its WAIT_FOR_EVENT steps wait for: its own emails' outcomes reach it in any step (db/record-events.ts). */
  emailWaits?: string[];
  /**
   * A test run with its timers divided by `timeScale`: no entry is claimed (the re-entry rule
   * neither applies to it nor counts it), and the contact's real executions do not conflict with it.
   */
  test?: { timeScale: number };
}

/**
 * The entry (the re-entry rule) and the execution row, and with them the first step's start when
 * it is given: null when the contact may not enter. A claim found again (the same execution id)
 * says whether its first step's start is recorded. A test run claims no entry and is always written.
 */
export async function claimExecution(
  em: EntityManager,
  input: ExecutionClaim,
  firstStep?: Omit<StepStart, 'executionId'>,
): Promise<{ id: string; firstStepRecorded: boolean; names: { workflow: string; contact: string } } | null> {
  // One statement (it was a transaction of six, and one more for the names): the claim found again, else the entry (without
  // re-entry), the execution row already at its first step, and that step's start. The names label
  // the execution in the Temporal UI (the workflow's name, the contact's email).
  const row = await queryOne<{ id: string | null; recorded: boolean | null; workflow: string | null; contact: string | null }>(
    em,
    `with found as (
       select e.id, exists (select 1 from execution_steps s where s.execution_id = e.id and s.seq = 1) as recorded
       from workflow_executions e where e.id = ?
     ), entry as (
       insert into workflow_entries (workflow_id, contact_id)
       select ?, ? where ? and not exists (select 1 from found)
       on conflict do nothing returning 1
     ), exe as (
       insert into workflow_executions (id, project_id, workflow_id, contact_id, context, current_step_id, status, waiting_for_event, email_waits, test, time_scale)
       select ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?::text[], ?, ? where not exists (select 1 from found) and (? or exists (select 1 from entry))
       on conflict (workflow_id, contact_id) where status in ('RUNNING','WAITING') and not test do nothing
       returning id
     ), step as (
       insert into execution_steps (execution_id, seq, step_id, step_type, status)
       select id, 1, ?::text, ?, 'RUNNING' from exe where ?::text is not null
     ), claimed as (
       select id, recorded from found union all select id, ?::boolean from exe
     )
     select claimed.id, claimed.recorded, (select name from workflows where id = ?) as workflow, (select email from contacts where id = ?) as contact
     from (select 1) one left join claimed on true`,
    [
      input.executionId ?? null,
      input.journeyId, input.contactId, !input.allowReentry && !input.test,
      input.executionId ?? newId('exe'), input.projectId, input.journeyId, input.contactId, JSON.stringify(input.context),
      firstStep?.stepId ?? null, firstStep?.waiting ? 'WAITING' : 'RUNNING', firstStep?.waitingForEvent ?? null, input.emailWaits ?? [],
      !!input.test, input.test?.timeScale ?? 1,
      input.allowReentry || !!input.test,
      firstStep?.stepId ?? null, firstStep?.stepType ?? null, firstStep?.stepId ?? null,
      !!firstStep,
      input.journeyId, input.contactId,
    ],
  );
  if (!row?.id) return null;
  return { id: row.id, firstStepRecorded: !!row.recorded, names: { workflow: row.workflow ?? input.journeyId, contact: row.contact ?? input.contactId } };
}

/** Enabled journeys of the project whose trigger is this event. */
export async function journeysTriggeredBy(
  em: EntityManager,
  projectId: string,
  eventName: string,
): Promise<{ id: string; allowReentry: boolean }[]> {
  const rows = await query<{ id: string; allow_reentry: boolean }>(
    em,
    `select id, allow_reentry from workflows where project_id = ? and enabled and trigger_config->>'eventName' = ?`,
    [projectId, eventName],
  );
  return rows.map((r) => ({ id: r.id, allowReentry: r.allow_reentry }));
}

export async function activeExecutionIdsOfContact(em: EntityManager, projectId: string, contactId: string): Promise<string[]> {
  const rows = await query<{ id: string }>(
    em,
    `select id from workflow_executions where project_id = ? and contact_id = ? and status in ('RUNNING','WAITING')`,
    [projectId, contactId],
  );
  return rows.map((r) => r.id);
}

export async function activeExecutionIdsOfJourney(em: EntityManager, projectId: string, journeyId: string): Promise<string[]> {
  const rows = await query<{ id: string }>(
    em,
    `select id from workflow_executions where project_id = ? and workflow_id = ? and status in ('RUNNING','WAITING')`,
    [projectId, journeyId],
  );
  return rows.map((r) => r.id);
}

export interface StepStart {
  executionId: string;
  seq: number;
  stepId: string;
  stepType: string;
  waiting: boolean;
  waitingForEvent: string | null;
}

export interface StepFinish {
  executionId: string;
  seq: number;
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED';
  branch?: string | null;
  output?: JsonValue;
  error?: string;
  context?: Record<string, JsonValue>;
}

export interface ExecutionFinish {
  executionId: string;
  status: Exclude<ExecutionStatus, 'RUNNING' | 'WAITING'>;
  exitReason?: string;
  error?: string;
}

/** A step begins: the execution shows it as current (WAITING while a timer or an event holds it). */
export async function recordStepStarted(em: EntityManager, input: StepStart): Promise<void> {
  await query(
    em,
    `with exe as (
       update workflow_executions set current_step_id = ?, status = ?, waiting_for_event = ?, updated_at = now()
       where id = ? and status in ('RUNNING','WAITING')
     )
     insert into execution_steps (execution_id, seq, step_id, step_type, status) values (?, ?, ?, ?, 'RUNNING')
     on conflict (execution_id, seq) do nothing`,
    [input.stepId, input.waiting ? 'WAITING' : 'RUNNING', input.waitingForEvent, input.executionId, input.executionId, input.seq, input.stepId, input.stepType],
  );
}

export async function recordStepFinished(em: EntityManager, input: StepFinish): Promise<void> {
  await query(
    em,
    `with step as (
       update execution_steps set status = ?, branch = ?, output = ?::jsonb, error = ?, finished_at = now()
       where execution_id = ? and seq = ? and status = 'RUNNING'
     )
     update workflow_executions set status = case when status = 'WAITING' then 'RUNNING' else status end,
       waiting_for_event = null, context = coalesce(?::jsonb, context), updated_at = now()
     where id = ? and status in ('RUNNING','WAITING')`,
    [
      input.status, input.branch ?? null, JSON.stringify(input.output ?? null), input.error ?? null, input.executionId, input.seq,
      input.context === undefined ? null : JSON.stringify(input.context), input.executionId,
    ],
  );
}

/** The final status; a step still marked RUNNING ends with it (a cancelled wait, a failed call). */
export async function finishExecution(em: EntityManager, input: ExecutionFinish): Promise<void> {
  await query(
    em,
    `with exe as (
       update workflow_executions set status = ?, exit_reason = ?, error = ?, waiting_for_event = null,
         finished_at = now(), updated_at = now()
       where id = ? and status in ('RUNNING','WAITING')
     )
     update execution_steps set status = ?, error = ?, finished_at = now() where execution_id = ? and status = 'RUNNING'`,
    [
      input.status, input.exitReason ?? null, input.error ?? null, input.executionId,
      input.status === 'CANCELLED' ? 'CANCELLED' : 'FAILED', input.error ?? null, input.executionId,
    ],
  );
}

/** What follows a step: the next one's start, or the execution's end. */
export type StepSuccessor = { start: StepStart } | { finish: ExecutionFinish };

/** A step ends and the next one begins or the execution ends, inside the caller's transaction. */
export async function stepTransition(tx: EntityManager, input: { finished: StepFinish; next: StepSuccessor }): Promise<void> {
  await recordStepFinished(tx, input.finished);
  if ('start' in input.next) await recordStepStarted(tx, input.next.start);
  else await finishExecution(tx, input.next.finish);
}

/**
 * A step's end and what follows in one transaction: one activity between two steps where there
 * were two (the journey workflow, PATCHES.journeyStepTransitions).
 */
export const recordStepTransition = (em: EntityManager, input: { finished: StepFinish; next: StepSuccessor }) =>
  transaction(em, (tx) => stepTransition(tx, input));

export async function listExecutions(
  em: EntityManager,
  projectId: string,
  journeyId: string,
  opts: { limit: number; cursor?: string; status?: ExecutionStatus; test?: boolean },
): Promise<CursorPage<ExecutionDto>> {
  const where = ['project_id = ?', 'workflow_id = ?'];
  const params: unknown[] = [projectId, journeyId];
  if (opts.status) {
    where.push('status = ?');
    params.push(opts.status);
  }
  if (opts.test !== undefined) {
    where.push('test = ?');
    params.push(opts.test);
  }
  const page = await keysetPage<ExecutionRow>(em, {
    from: 'workflow_executions',
    columns: COLUMNS,
    idColumn: 'id',
    where,
    params,
    limit: opts.limit,
    cursor: opts.cursor,
  });
  return { ...page, data: page.data.map(toDto) };
}

export async function getExecution(em: EntityManager, projectId: string, journeyId: string, id: string): Promise<ExecutionDto> {
  const row = await queryOne<ExecutionRow>(
    em,
    `select ${COLUMNS} from workflow_executions where project_id = ? and workflow_id = ? and id = ?`,
    [projectId, journeyId, id],
  );
  if (!row) throw notFound('execution');
  const steps = await query<{
    seq: number;
    step_id: string;
    step_type: string;
    status: ExecutionStepDto['status'];
    branch: string | null;
    output: JsonValue | null;
    error: string | null;
    started_at: Date;
    finished_at: Date | null;
  }>(em, 'select * from execution_steps where execution_id = ? order by seq', [id]);
  return {
    ...toDto(row),
    steps: steps.map((s) => ({
      seq: s.seq,
      stepId: s.step_id,
      stepType: s.step_type,
      status: s.status,
      branch: s.branch,
      output: s.output,
      error: s.error,
      startedAt: new Date(s.started_at).toISOString(),
      finishedAt: iso(s.finished_at),
    })),
  };
}

/** The run of the execution's Temporal workflow, once the API has started it (the Web UI link names it). */
export async function recordTemporalRunId(em: EntityManager, executionId: string, runId: string): Promise<void> {
  await query(em, 'update workflow_executions set temporal_run_id = ? where id = ?', [runId, executionId]);
}

/**
 * The email an event about an email (email.opened…) simulated for a test run is about: the one
 * its current wait waits for (the SEND_EMAIL step named by the wait's emailStepId, else the last
 * email the execution queued), as the wait would pick it; undefined before any email was queued.
 * The wait's config is read from the journey as it is now, which is the one the run started with
 * unless the step was edited since.
 */
export async function emailOfCurrentWait(em: EntityManager, executionId: string, eventName: string): Promise<string | undefined> {
  const row = await queryOne<{ email_id: string }>(
    em,
    `select s.output->>'emailId' as email_id
     from workflow_executions x join execution_steps s on s.execution_id = x.id
     where x.id = ? and s.step_type = 'SEND_EMAIL' and s.output->>'emailId' is not null
       and s.step_id = coalesce((select w.config->>'emailStepId' from workflow_steps w
         where w.id = x.current_step_id and w.type = 'WAIT_FOR_EVENT' and w.config->>'eventName' = ?), s.step_id)
     order by s.seq desc limit 1`,
    [executionId, eventName],
  );
  return row?.email_id;
}

/** Undoes a claim whose Temporal workflow could not be started, so the contact can enter on a retry. */
export async function releaseExecution(
  em: EntityManager,
  executionId: string,
  input: Pick<ExecutionClaim, 'journeyId' | 'contactId' | 'allowReentry' | 'test'>,
): Promise<void> {
  await transaction(em, async (tx) => {
    await query(tx, 'delete from workflow_executions where id = ?', [executionId]);
    // A test run claimed no entry: the contact's own one stays.
    if (!input.allowReentry && !input.test) {
      await query(tx, 'delete from workflow_entries where workflow_id = ? and contact_id = ?', [input.journeyId, input.contactId]);
    }
  });
}
