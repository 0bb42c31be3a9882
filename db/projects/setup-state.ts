import type { EntityManager } from '@mikro-orm/postgresql';
import { queryOne } from '../sql';

/** The dashboard's onboarding checklist: what a project still lacks before it really sends. */
export interface SetupStateDto {
  hasVerifiedDomain: boolean;
  hasTemplate: boolean;
  hasContact: boolean;
  /** An email the relay accepted (a sent_at), whatever happened to it afterwards. */
  hasSentEmail: boolean;
  hasEnabledWorkflow: boolean;
  complete: boolean;
}

/** One round trip of `exists` probes, each stopping at its first row. */
export async function setupState(em: EntityManager, projectId: string): Promise<SetupStateDto> {
  const row = await queryOne<Omit<SetupStateDto, 'complete'>>(
    em,
    `select
       exists (select 1 from domains where project_id = ? and status = 'verified') as "hasVerifiedDomain",
       exists (select 1 from templates where project_id = ?) as "hasTemplate",
       exists (select 1 from contacts where project_id = ?) as "hasContact",
       exists (select 1 from emails where project_id = ? and sent_at is not null) as "hasSentEmail",
       exists (select 1 from workflows where project_id = ? and enabled) as "hasEnabledWorkflow"`,
    Array(5).fill(projectId),
  );
  const state = row!;
  return { ...state, complete: Object.values(state).every(Boolean) };
}
