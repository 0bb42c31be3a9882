import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, notFound, validationError } from '../../errors';
import { allowance, limitExceeded } from '../billing/allowance';
import { type ContactDto, getContact, normalizeEmail } from '../contacts/contacts';
import type { SenderPolicy } from '../domains/domains';
import { newId } from '../ids';
import { MESSAGE_FIELD_COLUMNS, messageFields } from '../templates/message-fields';
import { type CursorPage, projectRowsPage } from '../paging';
import { planEmails, prepareEmail, writeEmails } from '../messages/prepare';
import { segmentPredicate } from '../segments/audience';
import { query, queryOne } from '../sql';

/** Longest campaign name the API accepts (api/schemas/campaigns.ts). */
export const CAMPAIGN_NAME_MAX = 255;

/**
 * DRAFT → (send) SENDING, or SCHEDULED → SENDING → SENT; SCHEDULED / SENDING → (cancel) CANCELLED.
 * SENT and CANCELLED are final.
 */
export type CampaignStatus = 'DRAFT' | 'SCHEDULED' | 'SENDING' | 'SENT' | 'CANCELLED';
export type CampaignType = 'MARKETING' | 'TRANSACTIONAL';

export interface CampaignStats {
  totalRecipients: number;
  /** Handed to the relay: accepted, or refused by it for good (a hard bounce, counted in `bounced` too). */
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  complained: number;
  unsubscribed: number;
  /** opened / sent, clicked / sent, bounced / sent; 0 before anything was sent. */
  openRate: number;
  clickRate: number;
  bounceRate: number;
}

export interface CampaignDto {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  type: CampaignType;
  /** null: every subscribed contact of the project. */
  segmentId: string | null;
  status: CampaignStatus;
  scheduledFor: string | null;
  /** When sending began and the audience was frozen; null before. */
  startedAt: string | null;
  /** When the last email was handed over and the campaign became SENT. */
  sentAt: string | null;
  cancelledAt: string | null;
  totalRecipients: number;
  stats: CampaignStats;
  createdAt: string;
  updatedAt: string;
}

export interface CampaignInput {
  name: string;
  description?: string | null;
  subject: string;
  body: string;
  from: string;
  fromName?: string | null;
  replyTo?: string | null;
  type: CampaignType;
  segmentId?: string | null;
}

/** A campaigns row as the driver returns it. */
export interface CampaignRow {
  id: string;
  project_id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from_email: string;
  from_name: string | null;
  reply_to: string | null;
  type: CampaignType;
  segment_id: string | null;
  status: CampaignStatus;
  scheduled_for: Date | null;
  snapshot_at: Date | null;
  sent_at: Date | null;
  cancelled_at: Date | null;
  total_recipients: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, project_id, name, description, subject, body, from_email, from_name, reply_to, type, segment_id, status,
  scheduled_for, snapshot_at, sent_at, cancelled_at, total_recipients, created_at, updated_at`;

/** API field → column, for inserts and replacements. */
const FIELD_COLUMNS: Record<keyof CampaignInput, string> = { ...MESSAGE_FIELD_COLUMNS, segmentId: 'segment_id' };
const FIELDS = Object.keys(FIELD_COLUMNS) as (keyof CampaignInput)[];

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function toDto(row: CampaignRow, stats: CampaignStats): CampaignDto {
  return {
    id: row.id,
    ...messageFields(row),
    segmentId: row.segment_id,
    status: row.status,
    scheduledFor: iso(row.scheduled_for),
    startedAt: iso(row.snapshot_at),
    sentAt: iso(row.sent_at),
    cancelledAt: iso(row.cancelled_at),
    totalRecipients: row.total_recipients,
    stats,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

// ---- Stats ----------------------------------------------------------------------------------------

interface CountsRow {
  campaign_id: string;
  sent: string;
  delivered: string;
  opened: string;
  clicked: string;
  bounced: string;
  complained: string;
  unsubscribed: string;
}

const rate = (n: number, of: number) => (of > 0 ? Math.round((n / of) * 10_000) / 10_000 : 0);

function toStats(totalRecipients: number, c: CountsRow | undefined): CampaignStats {
  const n = (v: string | undefined) => Number(v ?? 0);
  const sent = n(c?.sent);
  const opened = n(c?.opened);
  const clicked = n(c?.clicked);
  const bounced = n(c?.bounced);
  return {
    totalRecipients,
    sent,
    delivered: n(c?.delivered),
    opened,
    clicked,
    bounced,
    complained: n(c?.complained),
    unsubscribed: n(c?.unsubscribed),
    openRate: rate(opened, sent),
    clickRate: rate(clicked, sent),
    bounceRate: rate(bounced, sent),
  };
}

/**
 * The one definition of campaign stats, over `emails e left join contacts ct`: analytics counts
 * with it too. "sent": handed to the relay, so an email it refused (BOUNCED with no sent_at)
 * counts in `sent` and `bounced` alike. "unsubscribed" are recipients unsubscribed now whose
 * `contact.unsubscribed` came after their email.
 */
export const CAMPAIGN_COUNTS = `count(coalesce(e.sent_at, e.bounced_at)) as sent, count(e.delivered_at) as delivered, count(e.opened_at) as opened,
  count(e.clicked_at) as clicked, count(e.bounced_at) as bounced, count(e.complained_at) as complained,
  count(*) filter (where e.sent_at is not null and ct.subscribed = false and exists (
    select 1 from events ev
    where ev.contact_id = e.contact_id and ev.name = 'contact.unsubscribed' and ev.created_at >= e.sent_at)) as unsubscribed`;

async function countsOf(em: EntityManager, campaignIds: string[]): Promise<Map<string, CountsRow>> {
  if (campaignIds.length === 0) return new Map();
  const rows = await query<CountsRow>(
    em,
    `select e.campaign_id, ${CAMPAIGN_COUNTS}
     from emails e left join contacts ct on ct.id = e.contact_id
     where e.campaign_id = any(?::text[])
     group by e.campaign_id`,
    [campaignIds],
  );
  return new Map(rows.map((r) => [r.campaign_id, r]));
}

async function withStats(em: EntityManager, rows: CampaignRow[]): Promise<CampaignDto[]> {
  // A draft has sent nothing: only campaigns that started sending are counted.
  const counts = await countsOf(
    em,
    rows.filter((r) => r.status !== 'DRAFT').map((r) => r.id),
  );
  return rows.map((r) => toDto(r, toStats(r.total_recipients, counts.get(r.id))));
}

export async function campaignStats(em: EntityManager, projectId: string, id: string): Promise<CampaignStats> {
  return (await getCampaign(em, projectId, id)).stats;
}

// ---- Audience -------------------------------------------------------------------------------------

/**
 * `select c.id from contacts c …`: who a campaign goes to. Segment members (or every contact when
 * no segment is set) that are subscribed; a TRANSACTIONAL campaign to a segment also reaches its
 * unsubscribed members (service mail, as transactional templates do), but "all contacts" always
 * means the subscribed ones. The send re-checks the subscription of every recipient of a
 * MARKETING campaign, so an unsubscribe during a long send is honoured.
 */
export async function audienceSql(
  em: EntityManager,
  projectId: string,
  campaign: { segmentId: string | null; type: CampaignType },
): Promise<{ sql: string; params: unknown[] }> {
  const subscribedOnly = campaign.type === 'MARKETING' || campaign.segmentId === null;
  const where = ['c.project_id = ?'];
  const params: unknown[] = [projectId];
  if (subscribedOnly) where.push('c.subscribed');
  if (campaign.segmentId !== null) {
    const segment = await segmentPredicate(em, projectId, campaign.segmentId);
    where.push(`(${segment.sql})`);
    params.push(...segment.params);
  }
  return { sql: `select c.id from contacts c where ${where.join(' and ')}`, params };
}

export async function countAudience(
  em: EntityManager,
  projectId: string,
  campaign: { segmentId: string | null; type: CampaignType },
): Promise<number> {
  const audience = await audienceSql(em, projectId, campaign);
  const row = await queryOne<{ n: string }>(em, `select count(*) as n from (${audience.sql}) a`, audience.params);
  return Number(row!.n);
}

/** The segment must exist in the project (segmentPredicate refuses one that does not). */
export async function checkSegment(em: EntityManager, projectId: string, segmentId: string | null | undefined): Promise<void> {
  if (segmentId) await segmentPredicate(em, projectId, segmentId);
}

// ---- CRUD -----------------------------------------------------------------------------------------

async function loadRow(em: EntityManager, projectId: string, id: string, lock = false): Promise<CampaignRow> {
  const row = await queryOne<CampaignRow>(
    em,
    `select ${COLUMNS} from campaigns where project_id = ? and id = ?${lock ? ' for update' : ''}`,
    [projectId, id],
  );
  if (!row) throw notFound('campaign');
  return row;
}

export async function createCampaign(em: EntityManager, projectId: string, input: CampaignInput): Promise<CampaignDto> {
  const row = await queryOne<CampaignRow>(
    em,
    `insert into campaigns (id, project_id, ${FIELDS.map((f) => FIELD_COLUMNS[f]).join(', ')})
     values (?, ?, ${FIELDS.map(() => '?').join(', ')}) returning ${COLUMNS}`,
    [newId('cmp'), projectId, ...FIELDS.map((f) => input[f] ?? null)],
  );
  return (await withStats(em, [row!]))[0]!;
}

export async function getCampaign(em: EntityManager, projectId: string, id: string): Promise<CampaignDto> {
  return (await withStats(em, [await loadRow(em, projectId, id)]))[0]!;
}

export async function listCampaigns(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string },
): Promise<CursorPage<CampaignDto>> {
  const page = await projectRowsPage<CampaignRow>(em, 'campaigns', COLUMNS, projectId, opts);
  return { ...page, data: await withStats(em, page.data) };
}

const notEditable = (status: CampaignStatus) =>
  new AppError(409, 'CAMPAIGN_NOT_EDITABLE', `A ${status} campaign cannot be changed`, {
    suggestion: 'Only DRAFT and SCHEDULED campaigns can be replaced; duplicate it to send a changed copy.',
  });

/**
 * PUT: every field replaced (omitted optional fields become null / their default). `scheduledFor`
 * may move a SCHEDULED campaign (it must stay in the future); on a DRAFT it may only repeat its
 * current value (null): drafts are scheduled with POST /campaigns/:id/send. Returns whether the
 * schedule moved, so the caller can tell the waiting workflow. Run inside a transaction.
 */
export async function replaceCampaign(
  em: EntityManager,
  projectId: string,
  id: string,
  input: CampaignInput & { scheduledFor?: string | null },
): Promise<{ campaign: CampaignDto; rescheduledTo?: string }> {
  const current = await loadRow(em, projectId, id, true);
  if (current.status !== 'DRAFT' && current.status !== 'SCHEDULED') throw notEditable(current.status);
  let scheduledFor = current.scheduled_for ? new Date(current.scheduled_for) : null;
  let rescheduledTo: string | undefined;
  if (input.scheduledFor !== undefined) {
    const wanted = input.scheduledFor === null ? null : new Date(input.scheduledFor);
    if ((wanted?.getTime() ?? null) !== (scheduledFor?.getTime() ?? null)) {
      if (current.status === 'DRAFT') {
        throw validationError([
          { field: 'scheduledFor', message: 'A draft is scheduled with POST /campaigns/:id/send {scheduledFor}', code: 'not_scheduled' },
        ]);
      }
      if (wanted === null) {
        throw validationError([
          { field: 'scheduledFor', message: 'A scheduled campaign needs a time; cancel it to stop it', code: 'invalid_type' },
        ]);
      }
      if (wanted.getTime() <= Date.now()) {
        throw validationError([{ field: 'scheduledFor', message: 'Must be in the future', code: 'in_the_past' }]);
      }
      scheduledFor = wanted;
      rescheduledTo = wanted.toISOString();
    }
  }
  const row = await queryOne<CampaignRow>(
    em,
    `update campaigns set ${FIELDS.map((f) => `${FIELD_COLUMNS[f]} = ?`).join(', ')}, scheduled_for = ?,
       scheduled_at = case when ?::boolean then now() else scheduled_at end, updated_at = now()
     where project_id = ? and id = ? returning ${COLUMNS}`,
    [...FIELDS.map((f) => input[f] ?? null), scheduledFor, rescheduledTo !== undefined, projectId, id],
  );
  return { campaign: (await withStats(em, [row!]))[0]!, rescheduledTo };
}

export async function deleteCampaign(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await query(
    em,
    `delete from campaigns where project_id = ? and id = ? and status not in ('SCHEDULED','SENDING') returning id`,
    [projectId, id],
  );
  if (rows.length > 0) return;
  const row = await loadRow(em, projectId, id);
  throw new AppError(409, 'CAMPAIGN_ACTIVE', `The campaign is ${row.status}: it cannot be deleted now`, {
    suggestion: 'Cancel it with POST /campaigns/:id/cancel first.',
  });
}

export async function duplicateCampaign(em: EntityManager, projectId: string, id: string): Promise<CampaignDto> {
  const original = await loadRow(em, projectId, id);
  const suffix = ' (copy)';
  return createCampaign(em, projectId, {
    name: `${original.name.slice(0, CAMPAIGN_NAME_MAX - suffix.length)}${suffix}`,
    description: original.description,
    subject: original.subject,
    body: original.body,
    from: original.from_email,
    fromName: original.from_name,
    replyTo: original.reply_to,
    type: original.type,
    segmentId: original.segment_id,
  });
}

/**
 * POST /campaigns/:id/send, the database half (run in a transaction; the caller starts the
 * workflow before committing): DRAFT → SENDING now, or → SCHEDULED for a future `scheduledFor`.
 * The audience is counted now (0 → 422, more than the monthly campaign cap leaves → 402); it is
 * frozen when sending starts.
 */
export async function markCampaignForSending(
  em: EntityManager,
  projectId: string,
  id: string,
  scheduledFor: string | undefined,
): Promise<CampaignDto> {
  const current = await loadRow(em, projectId, id, true);
  if (current.status !== 'DRAFT') {
    throw new AppError(409, 'CAMPAIGN_NOT_DRAFT', `The campaign is ${current.status}: only a DRAFT can be sent`, {
      suggestion:
        current.status === 'SCHEDULED'
          ? 'It is already scheduled: PUT /campaigns/:id with a new scheduledFor moves it, POST /campaigns/:id/cancel stops it.'
          : 'Duplicate it with POST /campaigns/:id/duplicate and send the copy.',
    });
  }
  if (scheduledFor !== undefined && new Date(scheduledFor).getTime() <= Date.now()) {
    throw validationError([{ field: 'scheduledFor', message: 'Must be in the future', code: 'in_the_past' }]);
  }
  const audience = await countAudience(em, projectId, { segmentId: current.segment_id, type: current.type });
  if (audience === 0) {
    throw validationError(
      [
        {
          field: 'segmentId',
          message: current.segment_id ? 'The segment has no subscribed contacts' : 'The project has no subscribed contacts',
          code: 'no_recipients',
        },
      ],
      'The campaign has no recipients',
    );
  }
  // Against the month it will go out in. Not locked: the batches enforce the cap exactly (writeCampaignEmails).
  const allowed = await allowance(em, projectId, 'campaign', { lock: false, at: scheduledFor ? new Date(scheduledFor) : undefined });
  if (audience > allowed.remaining) throw limitExceeded('campaign', allowed, audience);
  const row = await queryOne<CampaignRow>(
    em,
    `update campaigns set status = ?, scheduled_for = ?, scheduled_at = case when ?::timestamptz is null then null else now() end,
       total_recipients = ?, updated_at = now()
     where project_id = ? and id = ? returning ${COLUMNS}`,
    [scheduledFor ? 'SCHEDULED' : 'SENDING', scheduledFor ?? null, scheduledFor ?? null, audience, projectId, id],
  );
  return (await withStats(em, [row!]))[0]!;
}

/** POST /campaigns/:id/cancel, the database half: SCHEDULED / SENDING → CANCELLED (409 otherwise). */
export async function markCampaignCancelled(em: EntityManager, projectId: string, id: string): Promise<CampaignDto> {
  const row = await queryOne<CampaignRow>(
    em,
    `update campaigns set status = 'CANCELLED', cancelled_at = now(), updated_at = now()
     where project_id = ? and id = ? and status in ('SCHEDULED','SENDING') returning ${COLUMNS}`,
    [projectId, id],
  );
  if (!row) {
    const current = await loadRow(em, projectId, id);
    throw new AppError(409, 'CAMPAIGN_NOT_CANCELLABLE', `The campaign is ${current.status}: only SCHEDULED or SENDING campaigns can be cancelled`, {
      suggestion: current.status === 'DRAFT' ? 'A draft sends nothing; delete it if it is not needed.' : 'It has already ended.',
    });
  }
  return (await withStats(em, [row]))[0]!;
}

/**
 * POST /campaigns/:id/test: one copy of the campaign rendered for `email` (with the data of the
 * project's contact of that address, if any; nothing is created), queued as an email row outside
 * the campaign (no campaign_id, so its stats and recipients do not change, and no tracking).
 * The delivery engine sends it (db/messages/delivery-queue.ts). Run in a transaction.
 */
export async function queueTestEmail(
  em: EntityManager,
  projectId: string,
  id: string,
  email: string,
  ctx: { publicUrl: string; linkSecret: string; senders: SenderPolicy; queue: string },
): Promise<string> {
  const c = await loadRow(em, projectId, id);
  const plan = await planEmails(
    em,
    {
      projectId,
      source: 'campaign',
      from: { email: c.from_email, name: c.from_name },
      replyTo: c.reply_to,
      subject: c.subject,
      body: c.body,
      marketing: c.type === 'MARKETING',
      // A test copy shows what recipients get, but its opens and clicks would count in the campaign's stats.
      tracking: false,
      queue: ctx.queue,
    },
    { senders: ctx.senders, links: { publicUrl: ctx.publicUrl, linkSecret: ctx.linkSecret } },
  );
  const address = normalizeEmail(email);
  const found = await queryOne<{ id: string }>(em, 'select id from contacts where project_id = ? and email = ?', [projectId, address]);
  const now = new Date().toISOString();
  const contact: ContactDto = found
    ? await getContact(em, projectId, found.id)
    : { id: 'test', email: address, subscribed: true, data: {}, createdAt: now, updatedAt: now };
  // A test copy is a campaign email like the others: it counts, and the cap applies to it.
  const [written] = await writeEmails(em, [prepareEmail(plan, contact, { toEmail: address, contactId: found?.id ?? null })], 'refuse');
  return written!.id;
}

/** Campaigns that address one of these segments (the way a campaign depends on a field or an event). */
export async function campaignsTargeting(
  em: EntityManager,
  projectId: string,
  segmentIds: string[],
): Promise<{ id: string; name: string; status: string }[]> {
  if (segmentIds.length === 0) return [];
  return query<{ id: string; name: string; status: string }>(
    em,
    'select id, name, status from campaigns where project_id = ? and segment_id = any(?::text[]) order by id',
    [projectId, segmentIds],
  );
}
