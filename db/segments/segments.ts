import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, notFound, validationError } from '../../errors';
import { campaignsTargeting } from '../campaigns/campaigns';
import { CONTACT_COLUMNS, type ContactDto, type ContactRow, toContactDto } from '../contacts/contacts';
import type { JsonValue } from '../entities/contact';
import { parseFieldName } from '../contacts/fields';
import { newId } from '../ids';
import { type PageBased, pageBased } from '../paging';
import { loadCompileContext } from '../conditions/compile-context';
import { type Condition, conditionFilters, referencedSegmentIds } from '../conditions/grammar';
import { type CompileContext, compileCondition } from '../conditions/sql';
import { query, queryOne, transaction } from '../sql';

/**
 * Segments (spec "Segment", contract-decisions "Segments"): DYNAMIC ones are a condition, compiled
 * to SQL (db/conditions/sql.ts) whenever they are counted, listed or computed; STATIC ones an explicit
 * member list (segment_members). `memberCount` is a cache, written when a segment is created, its
 * condition changes, its static members change, and by refresh and compute.
 *
 * Tracked dynamic segments also keep their membership in segment_members: compute diffs it with
 * the condition, writes the difference and records `segment.<slug>.entry` / `.exit` events, one per
 * contact, in one statement (temporal/segments/workflow.ts delivers them to workflows).
 */

export type SegmentType = 'DYNAMIC' | 'STATIC';

export interface SegmentDto {
  id: string;
  name: string;
  description: string | null;
  type: SegmentType;
  condition: Condition | null;
  trackMembership: boolean;
  memberCount: number;
  memberCountUpdatedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

interface SegmentRow {
  id: string;
  name: string;
  description: string | null;
  type: SegmentType;
  condition: Condition | null;
  track_membership: boolean;
  member_count: number;
  member_count_updated_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, name, description, type, condition, track_membership, member_count, member_count_updated_at, created_at, updated_at';

const iso = (d: Date) => new Date(d).toISOString();

function toDto(row: SegmentRow): SegmentDto {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    type: row.type,
    condition: row.condition,
    trackMembership: row.track_membership,
    memberCount: row.member_count,
    memberCountUpdatedAt: row.member_count_updated_at ? iso(row.member_count_updated_at) : null,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** "VIP Customers!" → "vip-customers" (the product's rule); a name with nothing left gives the id. */
export function segmentSlug(name: string, id: string): string {
  const slug = name
    .toLowerCase()
    .trim()
    .replace(/[^\w\s-]/g, '')
    .replace(/\s+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '');
  return slug || id;
}

export const membershipEventNames = (name: string, id: string) => {
  const slug = segmentSlug(name, id);
  return { entry: `segment.${slug}.entry`, exit: `segment.${slug}.exit` };
};

async function loadRow(em: EntityManager, projectId: string, id: string, lock = false): Promise<SegmentRow> {
  const row = await queryOne<SegmentRow>(em, `select ${COLUMNS} from segments where project_id = ? and id = ?${lock ? ' for update' : ''}`, [
    projectId,
    id,
  ]);
  if (!row) throw notFound('segment');
  return row;
}

export async function listSegments(em: EntityManager, projectId: string): Promise<SegmentDto[]> {
  const rows = await query<SegmentRow>(em, `select ${COLUMNS} from segments where project_id = ? order by id desc`, [projectId]);
  return rows.map(toDto);
}

export async function getSegment(em: EntityManager, projectId: string, id: string): Promise<SegmentDto> {
  return toDto(await loadRow(em, projectId, id));
}

// ---- Counting ----------------------------------------------------------------------------------------

/** The where clause of a dynamic segment's members (its own id guards against a self-reference). */
async function memberPredicate(
  em: EntityManager,
  projectId: string,
  segment: { id?: string; condition: Condition },
  now?: Date,
): Promise<{ sql: string; params: unknown[] }> {
  const ctx: CompileContext = await loadCompileContext(em, projectId, [segment.condition], now);
  return compileCondition(segment.condition, segment.id ? { ...ctx, expanding: new Set([segment.id]) } : ctx);
}

async function countMembers(em: EntityManager, projectId: string, segment: { id: string; type: SegmentType; condition: Condition | null }): Promise<number> {
  if (segment.type === 'STATIC' || !segment.condition) {
    const row = await queryOne<{ n: number }>(em, 'select count(*)::int as n from segment_members where segment_id = ?', [segment.id]);
    return row!.n;
  }
  const where = await memberPredicate(em, projectId, { id: segment.id, condition: segment.condition });
  const row = await queryOne<{ n: number }>(em, `select count(*)::int as n from contacts c where c.project_id = ? and (${where.sql})`, [
    projectId,
    ...where.params,
  ]);
  return row!.n;
}

async function storeCount(em: EntityManager, id: string, count: number): Promise<SegmentRow> {
  const row = await queryOne<SegmentRow>(
    em,
    `update segments set member_count = ?, member_count_updated_at = now() where id = ? returning ${COLUMNS}`,
    [count, id],
  );
  return row!;
}

/** POST /segments/:id/refresh: the count only; no membership writes, no events. */
export async function refreshSegmentCount(em: EntityManager, projectId: string, id: string): Promise<{ memberCount: number }> {
  const segment = await loadRow(em, projectId, id);
  const row = await storeCount(em, id, await countMembers(em, projectId, segment));
  return { memberCount: row.member_count };
}

// ---- Create, update, delete ------------------------------------------------------------------------

const conditionError = (message: string, code: string) => validationError([{ field: 'condition', message, code }]);

/**
 * The checks a condition needs the database for: every segment.<id> it names is a segment of the
 * project, and following those references never leads back to the segment being saved.
 */
async function checkReferences(em: EntityManager, projectId: string, condition: Condition, selfId?: string): Promise<void> {
  const direct = referencedSegmentIds(condition);
  if (direct.length === 0) return;
  const rows = await query<{ id: string; condition: Condition | null }>(em, 'select id, condition from segments where project_id = ?', [projectId]);
  const byId = new Map(rows.map((r) => [r.id, r.condition]));
  const missing = direct.filter((id) => !byId.has(id));
  if (missing.length > 0) throw conditionError(`Unknown segment: ${missing.join(', ')}`, 'unknown_segment');
  if (!selfId) return;
  const seen = new Set<string>();
  const pending = [...direct];
  for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
    if (id === selfId) throw conditionError('The condition refers back to this segment (directly or through other segments)', 'segment_cycle');
    if (seen.has(id)) continue;
    seen.add(id);
    const next = byId.get(id);
    if (next) pending.push(...referencedSegmentIds(next));
  }
}

export interface CreateSegmentInput {
  name: string;
  description?: string | null;
  type: SegmentType;
  condition?: Condition;
  trackMembership?: boolean;
}

export async function createSegment(em: EntityManager, projectId: string, input: CreateSegmentInput): Promise<SegmentDto> {
  if (input.type === 'DYNAMIC' && !input.condition) throw conditionError('A DYNAMIC segment needs a condition', 'required');
  if (input.type === 'STATIC' && input.condition) {
    throw conditionError('A STATIC segment has no condition: add members with POST /segments/:id/members', 'not_allowed');
  }
  if (input.condition) await checkReferences(em, projectId, input.condition);
  const id = newId('seg');
  const count = input.condition ? await countMembers(em, projectId, { id, type: input.type, condition: input.condition }) : 0;
  const row = await queryOne<SegmentRow>(
    em,
    `insert into segments (id, project_id, name, description, type, condition, track_membership, member_count, member_count_updated_at)
     values (?, ?, ?, ?, ?, ?::jsonb, ?, ?, now()) returning ${COLUMNS}`,
    [
      id,
      projectId,
      input.name,
      input.description ?? null,
      input.type,
      input.condition ? JSON.stringify(input.condition) : null,
      input.trackMembership ?? false,
      count,
    ],
  );
  return toDto(row!);
}

export interface UpdateSegmentInput {
  name?: string;
  description?: string | null;
  condition?: Condition;
  trackMembership?: boolean;
}

/**
 * A new condition is counted at once. Turning tracking off forgets the tracked membership, so
 * turning it on again starts afresh (the first compute then emits an entry per member).
 */
export async function updateSegment(em: EntityManager, projectId: string, id: string, patch: UpdateSegmentInput): Promise<SegmentDto> {
  return transaction(em, async (tx) => {
    const current = await loadRow(tx, projectId, id, true);
    if (patch.condition !== undefined) {
      if (current.type === 'STATIC') throw conditionError('A STATIC segment has no condition', 'not_allowed');
      await checkReferences(tx, projectId, patch.condition, id);
    }
    const sets: string[] = ['updated_at = now()'];
    const params: unknown[] = [];
    const set = (column: string, value: unknown) => {
      sets.push(`${column} = ?`);
      params.push(value);
    };
    if (patch.name !== undefined) set('name', patch.name);
    if (patch.description !== undefined) set('description', patch.description);
    if (patch.trackMembership !== undefined) set('track_membership', patch.trackMembership);
    if (patch.condition !== undefined) {
      const count = await countMembers(tx, projectId, { id, type: current.type, condition: patch.condition });
      sets.push('condition = ?::jsonb', 'member_count = ?', 'member_count_updated_at = now()');
      params.push(JSON.stringify(patch.condition), count);
    }
    const row = await queryOne<SegmentRow>(tx, `update segments set ${sets.join(', ')} where id = ? returning ${COLUMNS}`, [...params, id]);
    if (current.type === 'DYNAMIC' && current.track_membership && patch.trackMembership === false) {
      await query(tx, 'delete from segment_members where segment_id = ?', [id]);
      await query(tx, 'update segments set last_compute = null where id = ?', [id]);
    }
    return toDto(row!);
  });
}

/**
 * Whether a campaign that is scheduled or sending uses the segment. Campaigns arrive with their own
 * migration: until the table exists, none does.
 */
export async function segmentUsedByActiveCampaign(em: EntityManager, segmentId: string): Promise<boolean> {
  const table = await queryOne<{ t: string | null }>(em, `select to_regclass('campaigns')::text as t`);
  if (!table?.t) return false;
  const used = await queryOne(em, `select 1 from campaigns where segment_id = ? and status in ('SCHEDULED','SENDING') limit 1`, [segmentId]);
  return used !== undefined;
}

export async function deleteSegment(em: EntityManager, projectId: string, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    await loadRow(tx, projectId, id, true);
    if (await segmentUsedByActiveCampaign(tx, id)) {
      throw conflict(
        'The segment is used by a campaign that is scheduled or sending',
        'Cancel the campaign, or wait until it has been sent, then delete the segment.',
      );
    }
    await query(tx, 'delete from segments where id = ?', [id]);
  });
}

// ---- Members -----------------------------------------------------------------------------------------

/** GET /segments/:id/contacts: newest contacts first; a dynamic segment is evaluated now (live). */
export async function segmentContacts(
  em: EntityManager,
  projectId: string,
  id: string,
  page: number,
  pageSize: number,
): Promise<PageBased<ContactDto>> {
  const segment = await loadRow(em, projectId, id);
  let from: string;
  let params: unknown[];
  if (segment.type === 'STATIC' || !segment.condition) {
    from = 'contacts c join segment_members sm on sm.contact_id = c.id where sm.segment_id = ? and c.project_id = ?';
    params = [id, projectId];
  } else {
    const where = await memberPredicate(em, projectId, { id, condition: segment.condition });
    from = `contacts c where c.project_id = ? and (${where.sql})`;
    params = [projectId, ...where.params];
  }
  return pageBased(
    page,
    pageSize,
    async (limit, offset) =>
      (await query<ContactRow>(em, `select ${CONTACT_COLUMNS} from ${from} order by c.id desc limit ? offset ?`, [...params, limit, offset])).map(
        toContactDto,
      ),
    async () => (await queryOne<{ n: number }>(em, `select count(*)::int as n from ${from}`, params))!.n,
  );
}

const staticOnly = (segment: SegmentRow) => {
  if (segment.type !== 'STATIC') {
    throw conflict('Members can be added to and removed from STATIC segments only', 'A DYNAMIC segment follows its condition; change the condition instead.');
  }
};

const normalize = (email: string) => email.trim().toLowerCase();

/**
 * Adds contacts to a static segment by email. With createMissing, unknown emails become contacts
 * (subscribed as `subscribed` says, default true; existing contacts keep their state). `added`
 * counts new memberships only; `notFound` lists the emails (as sent) that are not contacts.
 */
export async function addStaticMembers(
  em: EntityManager,
  projectId: string,
  id: string,
  input: { emails: string[]; createMissing?: boolean; subscribed?: boolean },
): Promise<{ added: number; created: number; notFound: string[] }> {
  return transaction(em, async (tx) => {
    const segment = await loadRow(tx, projectId, id, true);
    staticOnly(segment);
    const wanted = [...new Set(input.emails.map(normalize))];
    let created = 0;
    if (input.createMissing) {
      const rows = await query(
        tx,
        `insert into contacts (id, project_id, email, subscribed)
         select ids.id, ?, ids.email, ? from unnest(?::text[], ?::text[]) as ids(id, email)
         on conflict (project_id, email) do nothing returning id`,
        [projectId, input.subscribed ?? true, wanted.map(() => newId('cnt')), wanted],
      );
      created = rows.length;
    }
    const found = await query<{ email: string }>(
      tx,
      'select email from contacts where project_id = ? and email = any(?::text[])',
      [projectId, wanted],
    );
    const added = await query(
      tx,
      `insert into segment_members (segment_id, contact_id)
       select ?, c.id from contacts c where c.project_id = ? and c.email = any(?::text[])
       on conflict do nothing returning contact_id`,
      [id, projectId, wanted],
    );
    await storeCount(tx, id, await countMembers(tx, projectId, segment));
    const known = new Set(found.map((f) => f.email));
    const seen = new Set<string>();
    const notFoundEmails = input.emails.filter((e) => {
      const key = normalize(e);
      if (known.has(key) || seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    return { added: added.length, created, notFound: notFoundEmails };
  });
}

export async function removeStaticMembers(em: EntityManager, projectId: string, id: string, emails: string[]): Promise<{ removed: number }> {
  return transaction(em, async (tx) => {
    const segment = await loadRow(tx, projectId, id, true);
    staticOnly(segment);
    const removed = await query(
      tx,
      `delete from segment_members sm using contacts c
       where sm.segment_id = ? and sm.contact_id = c.id and c.project_id = ? and c.email = any(?::text[]) returning sm.contact_id`,
      [id, projectId, [...new Set(emails.map(normalize))]],
    );
    await storeCount(tx, id, await countMembers(tx, projectId, segment));
    return { removed: removed.length };
  });
}

// ---- Compute (tracked dynamic segments) ------------------------------------------------------------

/** Compute applies to tracked dynamic segments only. */
export async function requireComputable(em: EntityManager, projectId: string, id: string): Promise<void> {
  const segment = await loadRow(em, projectId, id);
  if (segment.type !== 'DYNAMIC' || !segment.track_membership) {
    throw conflict(
      'Only a DYNAMIC segment with trackMembership can be computed',
      segment.type === 'DYNAMIC' ? 'PATCH the segment with {"trackMembership": true} first, or use /refresh for the count.' : 'Use /refresh for the count of a STATIC segment.',
    );
  }
}

export interface ComputeOutcome {
  added: number;
  removed: number;
  total: number;
  /** The entry/exit events recorded, an id range in which they are the segment's only ones (null: none). */
  events: { names: string[]; firstId: string; lastId: string } | null;
}

/**
 * Diffs the membership of a tracked dynamic segment with its condition and writes the difference:
 * new members, gone members, one entry or exit event each, the count. One statement in one
 * transaction, with the segment locked; the events get consecutive ids (`evt_` + time + a random
 * run prefix + a sequence number), so the delivery can page through them by id. The outcome is kept
 * under `computeId`: a retry of the same compute returns it instead of diffing again.
 */
export async function applySegmentMembership(
  em: EntityManager,
  input: { projectId: string; segmentId: string; computeId: string; now?: Date },
): Promise<ComputeOutcome> {
  return transaction(em, async (tx) => {
    const segment = await queryOne<SegmentRow & { last_compute: { id: string; outcome: ComputeOutcome } | null }>(
      tx,
      `select ${COLUMNS}, last_compute from segments where project_id = ? and id = ? for update`,
      [input.projectId, input.segmentId],
    );
    if (!segment) throw notFound('segment');
    if (segment.last_compute?.id === input.computeId) return segment.last_compute.outcome;
    if (segment.type !== 'DYNAMIC' || !segment.condition || !segment.track_membership) {
      throw new AppError(409, 'CONFLICT', 'Only a DYNAMIC segment with trackMembership can be computed');
    }
    const where = await memberPredicate(tx, input.projectId, { id: segment.id, condition: segment.condition }, input.now);
    const names = membershipEventNames(segment.name, segment.id);
    const idPrefix = `evt_${Date.now().toString(16).padStart(12, '0')}${randomBytes(4).toString('hex')}`;
    const row = await queryOne<{ added: number; removed: number; total: number; first_id: string | null; last_id: string | null }>(
      tx,
      `with matching as materialized (
         select c.id from contacts c where c.project_id = ? and (${where.sql})
       ),
       added as (
         insert into segment_members (segment_id, contact_id) select ?, m.id from matching m
         on conflict do nothing returning contact_id
       ),
       removed as (
         delete from segment_members sm
         where sm.segment_id = ? and not exists (select 1 from matching m where m.id = sm.contact_id)
         returning sm.contact_id
       ),
       changes as (
         select contact_id, ?::text as name, 1 as k from added
         union all
         select contact_id, ?::text as name, 2 as k from removed
       ),
       emitted as (
         insert into events (id, project_id, contact_id, name, data)
         select ?::text || lpad(to_hex(row_number() over (order by k, contact_id)), 12, '0'), ?, contact_id, name, ?::jsonb
         from changes
         returning id
       )
       select (select count(*) from added)::int as added, (select count(*) from removed)::int as removed,
              (select count(*) from matching)::int as total, (select min(id) from emitted) as first_id, (select max(id) from emitted) as last_id`,
      [
        input.projectId,
        ...where.params,
        segment.id,
        segment.id,
        names.entry,
        names.exit,
        idPrefix,
        input.projectId,
        JSON.stringify({ segmentId: segment.id, segmentName: segment.name }),
      ],
    );
    const r = row!;
    const outcome: ComputeOutcome = {
      added: r.added,
      removed: r.removed,
      total: r.total,
      events: r.first_id && r.last_id ? { names: [names.entry, names.exit], firstId: r.first_id, lastId: r.last_id } : null,
    };
    await query(
      tx,
      `update segments set member_count = ?, member_count_updated_at = now(), last_compute = ?::jsonb where id = ?`,
      [r.total, JSON.stringify({ id: input.computeId, outcome }), segment.id],
    );
    return outcome;
  });
}

export interface MembershipEvent {
  id: string;
  contactId: string;
  name: string;
  data: Record<string, JsonValue>;
  createdAt: string;
}

/** A page of the events one compute recorded, after `after` (exclusive), in id order. */
export async function membershipEventsPage(
  em: EntityManager,
  input: { projectId: string; segmentId: string; names: string[]; firstId: string; lastId: string; after: string | null; limit: number },
): Promise<MembershipEvent[]> {
  const rows = await query<{ id: string; contact_id: string; name: string; data: Record<string, JsonValue>; created_at: Date }>(
    em,
    `select e.id, e.contact_id, e.name, e.data, e.created_at from events e
     where e.project_id = ? and e.name = any(?::text[]) and e.id >= ? and e.id <= ? and e.id > ?
       and e.contact_id is not null and e.data->>'segmentId' = ?
     order by e.id limit ?`,
    [input.projectId, input.names, input.firstId, input.lastId, input.after ?? '', input.segmentId, input.limit],
  );
  return rows.map((r) => ({ id: r.id, contactId: r.contact_id, name: r.name, data: r.data, createdAt: iso(r.created_at) }));
}

/** Of these contacts, the ones with a running or waiting workflow execution (they may await an event). */
export async function contactsWithActiveExecutions(em: EntityManager, projectId: string, contactIds: string[]): Promise<Set<string>> {
  if (contactIds.length === 0) return new Set();
  const rows = await query<{ contact_id: string }>(
    em,
    `select distinct contact_id from workflow_executions where project_id = ? and contact_id = any(?::text[]) and status in ('RUNNING','WAITING')`,
    [projectId, contactIds],
  );
  return new Set(rows.map((r) => r.contact_id));
}

// ---- Usage -------------------------------------------------------------------------------------------

type SegmentRef = { id: string; name: string };

async function segmentsWhere(em: EntityManager, projectId: string, matches: (field: string) => boolean): Promise<SegmentRef[]> {
  const rows = await query<{ id: string; name: string; condition: Condition }>(
    em,
    'select id, name, condition from segments where project_id = ? and condition is not null order by id',
    [projectId],
  );
  return rows.filter((r) => conditionFilters(r.condition).some((f) => matches(f.field))).map((r) => ({ id: r.id, name: r.name }));
}

/** The names a filter may use for a contact field: `data.<key>` (or a path below it), or a standard field. */
function fieldMatcher(field: string): { segment: (f: string) => boolean; conditionFields: string[]; conditionPrefix?: string; name: string } {
  const parsed = parseFieldName(field);
  if (parsed.kind === 'custom') {
    const name = `data.${parsed.key}`;
    return { name, segment: (f) => f === name || f.startsWith(`${name}.`), conditionFields: [name], conditionPrefix: `${name}.` };
  }
  const standard = parsed.field;
  const aliases = standard === 'email' || standard === 'subscribed' ? [standard, `contact.${standard}`] : [standard];
  return {
    name: standard,
    segment: (f) => aliases.includes(f),
    conditionFields: aliases.filter((a) => a.startsWith('contact.')),
  };
}

/** Segments with a filter on the field (custom fields by `data.<key>` or a path below it). */
export async function segmentsUsingField(em: EntityManager, projectId: string, field: string): Promise<SegmentRef[]> {
  return segmentsWhere(em, projectId, fieldMatcher(field).segment);
}

/** Segments with a filter on `event.<name>`. */
export async function segmentsUsingEvent(em: EntityManager, projectId: string, eventName: string): Promise<SegmentRef[]> {
  return segmentsWhere(em, projectId, (f) => f === `event.${eventName}`);
}

export interface FieldUsage {
  field: string;
  segments: SegmentRef[];
  /** Campaigns whose segment filters on the field. */
  campaigns: { id: string; name: string; status: string }[];
  workflows: { workflowId: string; workflowName: string; stepId: string; stepName: string | null; field: string }[];
}

/** GET /contacts/fields/:field/usage: segments and workflow CONDITION steps that read the field. */
export async function fieldUsage(em: EntityManager, projectId: string, field: string): Promise<FieldUsage> {
  const matcher = fieldMatcher(field);
  const likePrefix = matcher.conditionPrefix ? `${matcher.conditionPrefix.replace(/[\\%_]/g, (m) => `\\${m}`)}%` : null;
  const [segments, steps] = await Promise.all([
    segmentsWhere(em, projectId, matcher.segment),
    matcher.conditionFields.length === 0
      ? Promise.resolve([])
      : query<{ workflow_id: string; workflow_name: string; id: string; name: string | null; field: string }>(
          em,
          `select s.workflow_id, w.name as workflow_name, s.id, s.name, s.config->>'field' as field
           from workflow_steps s join workflows w on w.id = s.workflow_id
           where w.project_id = ? and s.type = 'CONDITION'
             and (s.config->>'field' = any(?::text[]) or (?::text is not null and s.config->>'field' like ?::text))
           order by s.workflow_id, s.id`,
          [projectId, matcher.conditionFields, likePrefix, likePrefix],
        ),
  ]);
  return {
    field: matcher.name,
    segments,
    campaigns: await campaignsTargeting(em, projectId, segments.map((s) => s.id)),
    workflows: steps.map((s) => ({ workflowId: s.workflow_id, workflowName: s.workflow_name, stepId: s.id, stepName: s.name, field: s.field })),
  };
}
