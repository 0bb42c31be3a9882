import type { EntityManager } from '@mikro-orm/postgresql';
import { campaignsTargeting } from '../campaigns/campaigns';
import { fieldMatcher, type SegmentRef, segmentsUsingField } from '../segments/usage';
import { query } from '../sql';

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
    segmentsUsingField(em, projectId, field),
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
