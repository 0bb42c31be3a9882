import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { newId } from '../ids';
import { keysChanged } from './key-changes';
import { query, queryOne } from '../sql';

/**
 * Project status and the sending-reputation rules. A disabled project answers reads
 * but refuses writes (api/middleware/auth.ts), and sends nothing: deliverEmail marks its emails
 * FAILED with error `project disabled`, a campaign batch cancels its campaign.
 *
 * The rule: over the emails the project sent (handed to the relay, whether it took them or
 * refused the recipient) in the last 7 days — counted from the last time an operator lifted a
 * suspension, if later, so a re-enabled project starts afresh instead of being disabled again by
 * the bounce that arrives next — at least MIN_EMAILS sent and a bounce rate
 * (status BOUNCED / sent) over 10% or a complaint rate (status COMPLAINED / sent) over 0.5%
 * disables the project. It is evaluated after every recorded bounce and complaint.
 */
export const SECURITY_RULES = {
  windowDays: 7,
  minEmails: 100,
  maxBounceRate: 0.1,
  maxComplaintRate: 0.005,
} as const;

export const PROJECT_DISABLED_ERROR = 'project disabled';

export interface SendingFigures {
  sent: number;
  bounced: number;
  complained: number;
  bounceRate: number;
  complaintRate: number;
}

export interface SuspensionDto {
  id: string;
  reason: string;
  details: Record<string, unknown>;
  createdAt: string;
  liftedAt: string | null;
}

export interface ProjectSecurityDto {
  projectId: string;
  disabled: boolean;
  disabledReason: string | null;
  disabledAt: string | null;
  last7Days: SendingFigures;
  allTime: SendingFigures;
  /** The figures the automatic rule looks at (last 7 days, since the last lifted suspension). */
  evaluated: SendingFigures & { since: string };
  rules: typeof SECURITY_RULES;
  suspensions: SuspensionDto[];
}

interface CountRow {
  sent: number;
  bounced: number;
  complained: number;
}

const figures = (r: CountRow): SendingFigures => ({
  sent: r.sent,
  bounced: r.bounced,
  complained: r.complained,
  bounceRate: r.sent ? r.bounced / r.sent : 0,
  complaintRate: r.sent ? r.complained / r.sent : 0,
});

/**
 * Emails sent (handed to the relay) since `since`, and how many of them bounced or drew a
 * complaint. Handed to the relay: accepted (sent_at), or refused by it for good (a hard bounce
 * with no sent_at, db/messages/engagement.ts recordRelayBounces) — each half read from its own index.
 */
async function countSince(em: EntityManager, projectId: string, since: Date | null): Promise<CountRow> {
  const row = await queryOne<CountRow>(
    em,
    `with handed as (
       select status from emails where project_id = ? and sent_at >= coalesce(?::timestamptz, '-infinity')
       union all
       select status from emails where project_id = ? and sent_at is null and bounced_at >= coalesce(?::timestamptz, '-infinity')
     )
     select count(*)::int as sent,
            count(*) filter (where status = 'BOUNCED')::int as bounced,
            count(*) filter (where status = 'COMPLAINED')::int as complained
     from handed`,
    [projectId, since, projectId, since],
  );
  return row!;
}

/** Start of the rule's window: 7 days ago, or the last lifted suspension when that is later. */
async function windowStart(em: EntityManager, projectId: string): Promise<Date> {
  const row = await queryOne<{ since: Date }>(
    em,
    `select greatest(now() - make_interval(days => ?), coalesce(max(lifted_at), '-infinity')) as since
     from project_suspensions where project_id = ?`,
    [SECURITY_RULES.windowDays, projectId],
  );
  return new Date(row!.since);
}

/** GET /projects/:id/security. */
export async function projectSecurity(em: EntityManager, projectId: string): Promise<ProjectSecurityDto> {
  const project = await queryOne<{ disabled: boolean; disabled_reason: string | null; disabled_at: Date | null }>(
    em,
    'select disabled, disabled_reason, disabled_at from projects where id = ?',
    [projectId],
  );
  if (!project) throw notFound('project');
  const since = await windowStart(em, projectId);
  const [week, all, evaluated, suspensions] = await Promise.all([
    countSince(em, projectId, new Date(Date.now() - SECURITY_RULES.windowDays * 86_400_000)),
    countSince(em, projectId, null),
    countSince(em, projectId, since),
    query<{ id: string; reason: string; details: Record<string, unknown>; created_at: Date; lifted_at: Date | null }>(
      em,
      `select id, reason, details, created_at, lifted_at from project_suspensions where project_id = ?
       order by created_at desc, id desc limit 20`,
      [projectId],
    ),
  ]);
  return {
    projectId,
    disabled: project.disabled,
    disabledReason: project.disabled_reason,
    disabledAt: project.disabled_at ? new Date(project.disabled_at).toISOString() : null,
    last7Days: figures(week),
    allTime: figures(all),
    evaluated: { ...figures(evaluated), since: since.toISOString() },
    rules: SECURITY_RULES,
    suspensions: suspensions.map((s) => ({
      id: s.id,
      reason: s.reason,
      details: s.details,
      createdAt: new Date(s.created_at).toISOString(),
      liftedAt: s.lifted_at ? new Date(s.lifted_at).toISOString() : null,
    })),
  };
}

/**
 * Disables the project with a suspension row holding `details`; false when it was disabled
 * already (the conditional UPDATE makes concurrent callers agree on one suspension).
 */
export async function disableProject(em: EntityManager, projectId: string, reason: string, details: Record<string, unknown> = {}): Promise<boolean> {
  const disabled = await em.transactional(async (tx) => {
    const exists = await queryOne(tx, 'select 1 from projects where id = ?', [projectId]);
    if (!exists) throw notFound('project');
    const changed = await queryOne(
      tx,
      `update projects set disabled = true, disabled_reason = ?, disabled_at = now(), updated_at = now()
       where id = ? and not disabled returning id`,
      [reason, projectId],
    );
    if (!changed) return false;
    await query(tx, 'insert into project_suspensions (id, project_id, reason, details) values (?, ?, ?, ?::jsonb)', [
      newId('sus'),
      projectId,
      reason,
      JSON.stringify(details),
    ]);
    return true;
  });
  if (disabled) keysChanged(projectId);
  return disabled;
}

/** Enables the project and lifts its open suspensions; false when it was not disabled. */
export async function enableProject(em: EntityManager, projectId: string): Promise<boolean> {
  const enabled = await em.transactional(async (tx) => {
    const exists = await queryOne(tx, 'select 1 from projects where id = ?', [projectId]);
    if (!exists) throw notFound('project');
    const changed = await queryOne(
      tx,
      `update projects set disabled = false, disabled_reason = null, disabled_at = null, updated_at = now()
       where id = ? and disabled returning id`,
      [projectId],
    );
    await query(tx, 'update project_suspensions set lifted_at = now() where project_id = ? and lifted_at is null', [projectId]);
    return changed !== undefined;
  });
  if (enabled) keysChanged(projectId);
  return enabled;
}

/**
 * Applies the rule above after a bounce or complaint was recorded (call it in that transaction,
 * last). Returns true when this call disabled the project. The project's bounces and complaints
 * are judged one transaction at a time (a lock held to its commit): side by side, each would
 * count without the others' and none would see the line crossed.
 */
export async function enforceSendingReputation(em: EntityManager, projectId: string): Promise<boolean> {
  await query(em, 'select pg_advisory_xact_lock(hashtextextended(?, 0))', [`sending-reputation:${projectId}`]);
  const project = await queryOne<{ disabled: boolean }>(em, 'select disabled from projects where id = ?', [projectId]);
  if (!project || project.disabled) return false;
  const since = await windowStart(em, projectId);
  const f = figures(await countSince(em, projectId, since));
  if (f.sent < SECURITY_RULES.minEmails) return false;
  const bounces = f.bounceRate > SECURITY_RULES.maxBounceRate;
  const complaints = f.complaintRate > SECURITY_RULES.maxComplaintRate;
  if (!bounces && !complaints) return false;
  const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
  const reason = bounces
    ? `Bounce rate ${pct(f.bounceRate)} over ${f.sent} emails exceeds ${pct(SECURITY_RULES.maxBounceRate)}`
    : `Complaint rate ${pct(f.complaintRate)} over ${f.sent} emails exceeds ${pct(SECURITY_RULES.maxComplaintRate)}`;
  return disableProject(em, projectId, reason, { rule: bounces ? 'bounce_rate' : 'complaint_rate', since: since.toISOString(), ...f });
}

/**
 * The campaign's status as the sender's throttle reservation reads it, with PROJECT_DISABLED in
 * place of SENDING once the project is disabled: the batch stops within one reservation.
 */
export const campaignSendStatusSql = (campaignId: string) => ({
  sql: `select case when p.disabled then 'PROJECT_DISABLED' else c.status end
        from campaigns c join projects p on p.id = c.project_id where c.id = ?`,
  params: [campaignId],
});

/**
 * A disabled project's campaign stops rather than burn through its audience: SCHEDULED / SENDING
 * → CANCELLED with error `project disabled`. False (nothing changed) when the project is enabled.
 */
export async function cancelCampaignIfProjectDisabled(em: EntityManager, campaignId: string): Promise<boolean> {
  const row = await queryOne(
    em,
    `update campaigns c set status = 'CANCELLED', cancelled_at = now(), error = ?, updated_at = now()
     from projects p where p.id = c.project_id and p.disabled and c.id = ? and c.status in ('SCHEDULED','SENDING')
     returning c.id`,
    [PROJECT_DISABLED_ERROR, campaignId],
  );
  return row !== undefined;
}
