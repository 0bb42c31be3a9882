import { useQueryClient } from '@tanstack/react-query';
import { type RefObject, useCallback, useState } from 'react';
import { api, ApiError } from '../../api/client';
import type { Template } from '../../api/templates';
import { type Point, spotBelow } from './layout';
import { graphProblems, readableGraphError } from './path';
import { savePositions } from './positions';
import { journeyKey, journeysKey } from './queries';
import { defaultConfig } from './stepTypes';
import type { Branch, GraphProblems, JourneyDetail, Step, Transition, UserStepType } from './types';

/**
 * The graph edits the canvas and the panels make, one request each, then the journey read again.
 * A refusal is kept to be shown; when it names steps and transitions (enabling, or editing an
 * enabled journey into an invalid graph) those are drawn on the graph until the next check.
 */
export function useJourneyEditor(journey: JourneyDetail, templates: ReadonlyArray<Template>, positionsRef: RefObject<Record<string, Point>>) {
  const client = useQueryClient();
  const [error, setError] = useState<unknown>(null);
  const [problems, setProblems] = useState<GraphProblems | null>(null);
  const [busy, setBusy] = useState(0);
  const id = journey.id;

  const run = useCallback(
    async <T>(call: () => Promise<T>, opts: { checksGraph?: boolean } = {}): Promise<T | undefined> => {
      setError(null);
      setBusy((n) => n + 1);
      try {
        const result = await call();
        if (opts.checksGraph ?? journey.enabled) setProblems(null);
        return result;
      } catch (err) {
        const found = graphProblems(err);
        setError(found && err instanceof ApiError ? readableGraphError(err, journey) : err);
        if (found) setProblems(found);
        return undefined;
      } finally {
        setBusy((n) => n - 1);
        await client.invalidateQueries({ queryKey: journeyKey(id) });
      }
    },
    [client, id, journey],
  );

  /** Adds a step at `position`, or below `after` (else below everything); resolves to the new step. */
  const addStep = useCallback(
    (type: UserStepType, position?: Point, after?: string) => {
      const config = defaultConfig(type, { templates });
      if ('error' in config) {
        setError(new Error(String(config.error)));
        return Promise.resolve(undefined);
      }
      const current = positionsRef.current ?? {};
      const at = position ?? spotBelow(Object.values(current), after ? current[after] : undefined);
      return run(async () => {
        const step = await api<Step>(`/workflows/${id}/steps`, { method: 'POST', body: { type, config } });
        // Saved before the journey is read again, so the new node appears where it was put.
        savePositions(id, { ...current, [step.id]: at });
        return step;
      });
    },
    [id, positionsRef, run, templates],
  );

  const connect = useCallback(
    (fromStepId: string, toStepId: string, branch: Branch | null) =>
      run(() =>
        api<Transition>(`/workflows/${id}/transitions`, { method: 'POST', body: { fromStepId, toStepId, ...(branch ? { branch } : {}) } }),
      ),
    [id, run],
  );

  /** Deletes steps (each spliced when it has one way in and exactly one way out) and transitions. */
  const remove = useCallback(
    (stepIds: string[], transitionIds: string[], splice?: boolean) =>
      run(async () => {
        for (const stepId of stepIds) {
          const out = journey.transitions.filter((t) => t.fromStepId === stepId && t.toStepId !== stepId).length;
          const into = journey.transitions.filter((t) => t.toStepId === stepId && t.fromStepId !== stepId).length;
          const join = splice ?? (out === 1 && into > 0);
          await api(`/workflows/${id}/steps/${stepId}`, { method: 'DELETE', query: { splice: join ? 'true' : undefined } });
        }
        for (const transitionId of transitionIds) await api(`/workflows/${id}/transitions/${transitionId}`, { method: 'DELETE' });
        return true;
      }),
    [id, journey.transitions, run],
  );

  const patchJourney = useCallback(
    (body: Record<string, unknown>) =>
      run(
        async () => {
          const updated = await api<JourneyDetail>(`/workflows/${id}`, { method: 'PATCH', body });
          void client.invalidateQueries({ queryKey: journeysKey });
          return updated;
        },
        { checksGraph: body.enabled === true },
      ),
    [client, id, run],
  );

  // Problems of steps and transitions deleted since are no longer shown.
  const live: GraphProblems | null = problems
    ? {
        graph: problems.graph,
        steps: Object.fromEntries(Object.entries(problems.steps).filter(([s]) => journey.steps.some((x) => x.id === s))),
        transitions: Object.fromEntries(Object.entries(problems.transitions).filter(([t]) => journey.transitions.some((x) => x.id === t))),
      }
    : null;

  return {
    error,
    problems: live,
    /** For the step form's own refusals (an enabled journey's step edited into an invalid graph). */
    showProblems: setProblems as (problems: GraphProblems) => void,
    busy: busy > 0,
    addStep,
    connect,
    remove,
    patchJourney,
  };
}
