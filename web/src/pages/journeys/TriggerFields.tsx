import { EventNameField } from './EventNameField';

/** What starts a journey and whether it may start again for a contact: the same fields when it is created and in its settings. */

export function TriggerEventField({ value, onChange, error }: { value: string; onChange: (eventName: string) => void; error?: string }) {
  return (
    <EventNameField
      label="Trigger event"
      hint="Each time this event is recorded for a contact, the journey starts for them."
      value={value}
      onChange={(e) => onChange(e.target.value)}
      required
      error={error}
    />
  );
}

export function ReentryCheckbox({ checked, onChange }: { checked: boolean; onChange: (allow: boolean) => void }) {
  return (
    <label className="checkbox">
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} /> Let a contact go through it again (once their previous run
      has ended)
    </label>
  );
}
