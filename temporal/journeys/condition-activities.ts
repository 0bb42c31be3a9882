import { ApplicationFailure } from '@temporalio/activity';
import { evaluateCondition as evaluate } from '../../db/conditions/evaluate';
import { loadConditionFacts } from '../../db/conditions/facts';
import type { Orm } from '../../db/orm';
import { type StepConfigs, stepConfigSchemas } from '../../db/journeys/steps';

export interface EvaluateConditionInput {
  projectId: string;
  contactId: string;
  condition: StepConfigs['CONDITION'];
  /** The execution context (trigger event data merged with awaited events' data). */
  context: Record<string, unknown>;
}

/**
 * CONDITION steps (rules in db/conditions/evaluate.ts). The contact is read fresh on every evaluation, so
 * a journey sees changes made since it started; a contact that no longer exists gives false.
 */
export function createConditionActivities({ orm }: { orm: Orm }) {
  return {
    async evaluateCondition(input: EvaluateConditionInput): Promise<{ result: boolean }> {
      const parsed = stepConfigSchemas.CONDITION.safeParse(input.condition);
      if (!parsed.success) {
        // The API validates configs, so this is a bug or a hand-edited graph: retrying won't help.
        throw ApplicationFailure.nonRetryable(`Invalid CONDITION config: ${parsed.error.issues.map((i) => i.message).join('; ')}`, 'InvalidStepConfig');
      }
      const facts = await loadConditionFacts(orm.em.fork(), input.projectId, input.contactId, parsed.data);
      if (!facts) return { result: false };
      const result = evaluate({ ...facts, context: input.context ?? {}, condition: parsed.data, now: new Date() });
      return { result };
    },
  };
}

export type ConditionActivities = ReturnType<typeof createConditionActivities>;
