import { useId, type InputHTMLAttributes } from 'react';
import { useEventNames } from '../../api/events';
import { useProject } from '../../app/project';
import { TextField } from '../../components/ui';
import { useSystemEvents } from './queries';

/**
 * An event name input suggesting the names tracked in the project and those the service records
 * (segment.<slug>.* stands for every tracked segment, so it is not suggested as is).
 */
export function EventNameField({
  label,
  hint,
  error,
  ...input
}: { label: string; hint?: string; error?: string } & InputHTMLAttributes<HTMLInputElement>) {
  const listId = useId();
  const system = useSystemEvents();
  const { projectId } = useProject();
  const tracked = useEventNames(projectId);
  const names = [...new Set([...(tracked.data ?? []).map((e) => e.name), ...(system.data ?? []).map((e) => e.name).filter((n) => !n.includes('<'))])];
  return (
    <>
      <TextField label={label} hint={hint} error={error} list={listId} autoComplete="off" {...input} />
      <datalist id={listId}>
        {names.map((n) => (
          <option key={n} value={n} />
        ))}
      </datalist>
    </>
  );
}
