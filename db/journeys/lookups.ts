import type { EntityManager } from '@mikro-orm/postgresql';
import type { FieldType } from '../entities/contact-field';
import { query } from '../sql';
import type { StepType } from './steps';

/** Read-only lookups across a project's journeys: what the editor offers, and where an event is used. */

export type JourneyFieldType = FieldType | 'event';

/** A field a CONDITION step can test, as the journey editor lists it. */
export interface JourneyField {
  field: string;
  type: JourneyFieldType;
  source: 'contact' | 'data' | 'event';
}

/**
 * What a CONDITION step can test: the contact's email and subscription, its custom fields with
 * their registered type, and the event names seen in the project (type `event`: for the
 * triggered / notTriggered / triggeredWithin / triggeredOlderThan operators).
 */
export async function journeyFields(em: EntityManager, projectId: string): Promise<JourneyField[]> {
  const [data, events] = await Promise.all([
    query<{ key: string; type: FieldType }>(em, 'select key, type from contact_fields where project_id = ? order by key', [projectId]),
    // Distinct names by skipping through the (project_id, name, id) index: one probe per name,
    // not a scan of every event.
    query<{ name: string }>(
      em,
      `with recursive names(name) as (
         (select name from events where project_id = ? order by name limit 1)
         union all
         select (select e.name from events e where e.project_id = ? and e.name > n.name order by e.name limit 1)
         from names n where n.name is not null
       ) select name from names where name is not null`,
      [projectId, projectId],
    ),
  ]);
  return [
    { field: 'contact.email', type: 'string', source: 'contact' },
    { field: 'contact.subscribed', type: 'boolean', source: 'contact' },
    ...data.map((d) => ({ field: `data.${d.key}`, type: d.type, source: 'data' as const })),
    ...events.map((e) => ({ field: `event.${e.name}`, type: 'event' as const, source: 'event' as const })),
  ];
}

export interface EventJourneyUsage {
  workflowTriggers: { workflowId: string; workflowName: string; enabled: boolean }[];
  waitForEventSteps: { workflowId: string; workflowName: string; stepId: string; stepName: string | null }[];
  conditionSteps: { workflowId: string; workflowName: string; stepId: string; stepName: string | null; field: string; operator: string }[];
}

/** Journeys that start on the event, wait for it, or test it in a CONDITION (`event.<name>`). */
export async function journeysUsingEvent(em: EntityManager, projectId: string, eventName: string): Promise<EventJourneyUsage> {
  const [triggers, steps] = await Promise.all([
    query<{ id: string; name: string; enabled: boolean }>(
      em,
      `select id, name, enabled from workflows where project_id = ? and trigger_config->>'eventName' = ? order by id`,
      [projectId, eventName],
    ),
    query<{ workflow_id: string; workflow_name: string; id: string; name: string | null; type: StepType; field: string | null; operator: string | null }>(
      em,
      `select s.workflow_id, w.name as workflow_name, s.id, s.name, s.type, s.config->>'field' as field, s.config->>'operator' as operator
       from workflow_steps s join workflows w on w.id = s.workflow_id
       where w.project_id = ?
         and ((s.type = 'WAIT_FOR_EVENT' and s.config->>'eventName' = ?) or (s.type = 'CONDITION' and s.config->>'field' = ?))
       order by s.workflow_id, s.id`,
      [projectId, eventName, `event.${eventName}`],
    ),
  ]);
  return {
    workflowTriggers: triggers.map((t) => ({ workflowId: t.id, workflowName: t.name, enabled: t.enabled })),
    waitForEventSteps: steps
      .filter((s) => s.type === 'WAIT_FOR_EVENT')
      .map((s) => ({ workflowId: s.workflow_id, workflowName: s.workflow_name, stepId: s.id, stepName: s.name })),
    conditionSteps: steps
      .filter((s) => s.type === 'CONDITION')
      .map((s) => ({
        workflowId: s.workflow_id,
        workflowName: s.workflow_name,
        stepId: s.id,
        stepName: s.name,
        field: s.field!,
        operator: s.operator!,
      })),
  };
}
