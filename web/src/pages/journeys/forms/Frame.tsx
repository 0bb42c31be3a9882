import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { api } from '../../../api/client';
import type { Template } from '../../../api/templates';
import { ErrorNotice, TextField } from '../../../components/ui';
import { graphProblems } from '../path';
import { journeyKey } from '../queries';
import type { GraphProblems, JourneyDetail, Step } from '../types';

export type Built = { config: Record<string, unknown> } | { error: string };

export interface FormProps {
  journey: JourneyDetail;
  step: Step;
  templates: ReadonlyArray<Template>;
  onProblems: (problems: GraphProblems) => void;
}

/** A config value read as a string, for the form's first state. */
export const str = (v: unknown, fallback = '') => (typeof v === 'string' ? v : fallback);
export const UNITS = ['minutes', 'hours', 'days'] as const;
export type Unit = (typeof UNITS)[number];

/** The name field, the save button and the service's answer, around the fields of one type. */
export function Frame({
  journey,
  step,
  onProblems,
  build,
  children,
}: FormProps & { build: () => Built; children: (error: unknown) => ReactNode }) {
  const client = useQueryClient();
  const [name, setName] = useState(step.name ?? '');
  const [local, setLocal] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (config: Record<string, unknown>) =>
      api<Step>(`/workflows/${journey.id}/steps/${step.id}`, { method: 'PATCH', body: { name: name.trim() || null, config } }),
    onSuccess: () => client.invalidateQueries({ queryKey: journeyKey(journey.id) }),
    onError: (err) => {
      const problems = graphProblems(err);
      if (problems) onProblems(problems);
    },
  });
  return (
    <form
      className="step-form"
      aria-label="Step settings"
      onSubmit={(event) => {
        event.preventDefault();
        const built = build();
        if ('error' in built) {
          setLocal(built.error);
          return;
        }
        setLocal(null);
        save.mutate(built.config);
      }}
    >
      <TextField label="Step name" hint="Optional; shown on the graph" value={name} maxLength={255} onChange={(e) => setName(e.target.value)} />
      {children(save.error)}
      {local ? (
        <div role="alert" className="notice notice-error">
          <p>{local}</p>
        </div>
      ) : null}
      <ErrorNotice error={save.error} />
      {save.isSuccess && !save.isPending ? (
        <p role="status" className="notice notice-ok">
          Saved.
        </p>
      ) : null}
      <div className="actions">
        <button type="submit" className="button-primary" disabled={save.isPending}>
          Save step
        </button>
      </div>
    </form>
  );
}

