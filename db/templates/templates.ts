import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { newId } from '../ids';
import { MESSAGE_FIELD_COLUMNS, messageFields } from './message-fields';
import { type CursorPage, projectRowsPage } from '../paging';
import { query, queryOne } from '../sql';

/** Longest template name the API accepts (api/schemas/templates.ts). */
export const NAME_MAX = 255;

export type TemplateType = 'MARKETING' | 'TRANSACTIONAL';

export interface TemplateDto {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string | null;
  fromName: string | null;
  replyTo: string | null;
  type: TemplateType;
  createdAt: string;
  updatedAt: string;
}

export type TemplateInput = Pick<TemplateDto, 'name' | 'subject' | 'body' | 'type'> &
  Partial<Pick<TemplateDto, 'description' | 'from' | 'fromName' | 'replyTo'>>;

interface TemplateRow {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from_email: string | null;
  from_name: string | null;
  reply_to: string | null;
  type: TemplateType;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, name, description, subject, body, from_email, from_name, reply_to, type, created_at, updated_at';

/** API field → column, for inserts and partial updates. */
const FIELD_COLUMNS: Record<keyof TemplateInput, string> = MESSAGE_FIELD_COLUMNS;

function toDto(row: TemplateRow): TemplateDto {
  return {
    id: row.id,
    ...messageFields(row),
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

export async function createTemplate(em: EntityManager, projectId: string, input: TemplateInput): Promise<TemplateDto> {
  const fields = Object.keys(FIELD_COLUMNS) as (keyof TemplateInput)[];
  const row = await queryOne<TemplateRow>(
    em,
    `insert into templates (id, project_id, ${fields.map((f) => FIELD_COLUMNS[f]).join(', ')})
     values (?, ?, ${fields.map(() => '?').join(', ')}) returning ${COLUMNS}`,
    [newId('tpl'), projectId, ...fields.map((f) => input[f] ?? null)],
  );
  return toDto(row!);
}

export async function getTemplate(em: EntityManager, projectId: string, id: string): Promise<TemplateDto> {
  const row = await queryOne<TemplateRow>(em, `select ${COLUMNS} from templates where project_id = ? and id = ?`, [projectId, id]);
  if (!row) throw notFound('template');
  return toDto(row);
}

export async function updateTemplate(
  em: EntityManager,
  projectId: string,
  id: string,
  patch: Partial<TemplateInput>,
): Promise<TemplateDto> {
  const fields = (Object.keys(patch) as (keyof TemplateInput)[]).filter((f) => patch[f] !== undefined && f in FIELD_COLUMNS);
  const row = await queryOne<TemplateRow>(
    em,
    `update templates set ${[...fields.map((f) => `${FIELD_COLUMNS[f]} = ?`), 'updated_at = now()'].join(', ')}
     where project_id = ? and id = ? returning ${COLUMNS}`,
    [...fields.map((f) => patch[f]), projectId, id],
  );
  if (!row) throw notFound('template');
  return toDto(row);
}

export async function deleteTemplate(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await query(em, 'delete from templates where project_id = ? and id = ? returning id', [projectId, id]);
  if (rows.length === 0) throw notFound('template');
}

export async function duplicateTemplate(em: EntityManager, projectId: string, id: string): Promise<TemplateDto> {
  const original = await getTemplate(em, projectId, id);
  const { id: _id, createdAt: _c, updatedAt: _u, ...input } = original;
  // Names are at most 255 characters on input; a copy of a 255-character name must fit too, or
  // its own name would fail validation when sent back unchanged in a PATCH.
  const suffix = ' (copy)';
  return createTemplate(em, projectId, { ...input, name: `${original.name.slice(0, NAME_MAX - suffix.length)}${suffix}` });
}

export async function listTemplates(
  em: EntityManager,
  projectId: string,
  opts: { limit: number; cursor?: string },
): Promise<CursorPage<TemplateDto>> {
  const page = await projectRowsPage<TemplateRow>(em, 'templates', COLUMNS, projectId, opts);
  return { ...page, data: page.data.map(toDto) };
}

/**
 * Where a template is used: the SEND_EMAIL steps of the project's workflows that name it.
 * Campaigns arrive with their own issue and add their query here (none reference one yet).
 */
export async function templateUsage(
  em: EntityManager,
  projectId: string,
  id: string,
): Promise<{ campaigns: { id: string; name: string }[]; workflowSteps: { workflowId: string; stepId: string }[] }> {
  await getTemplate(em, projectId, id);
  const steps = await query<{ workflow_id: string; id: string }>(
    em,
    `select s.workflow_id, s.id from workflow_steps s join workflows w on w.id = s.workflow_id
     where w.project_id = ? and s.type = 'SEND_EMAIL' and s.config->>'templateId' = ?
     order by s.workflow_id, s.id`,
    [projectId, id],
  );
  return { campaigns: [], workflowSteps: steps.map((s) => ({ workflowId: s.workflow_id, stepId: s.id })) };
}
