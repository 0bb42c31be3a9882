import { useState } from 'react';
import { fieldError, TextArea, TextField } from '../../components/ui';
import { ReentryCheckbox, TriggerEventField } from './TriggerFields';
import type { JourneyDetail } from './types';

/** The journey's own settings: name, description, the event that starts it, and re-entry. */
export function JourneySettings({
  journey,
  busy,
  error,
  onSave,
}: {
  journey: JourneyDetail;
  busy: boolean;
  error: unknown;
  onSave: (body: Record<string, unknown>) => void;
}) {
  const [name, setName] = useState(journey.name);
  const [description, setDescription] = useState(journey.description ?? '');
  const [eventName, setEventName] = useState(journey.triggerConfig.eventName);
  const [allowReentry, setAllowReentry] = useState(journey.allowReentry);
  return (
    <form
      className="journey-settings"
      aria-label="Journey settings"
      onSubmit={(event) => {
        event.preventDefault();
        onSave({ name: name.trim(), description: description.trim() || null, eventName: eventName.trim(), allowReentry });
      }}
    >
      <h2>Journey settings</h2>
      <TextField label="Name" value={name} onChange={(e) => setName(e.target.value)} required error={fieldError(error, 'name')} />
      <TriggerEventField value={eventName} onChange={setEventName} error={fieldError(error, 'eventName')} />
      <TextArea label="Description" value={description} onChange={(e) => setDescription(e.target.value)} rows={2} maxLength={2000} />
      <ReentryCheckbox checked={allowReentry} onChange={setAllowReentry} />
      <div className="actions">
        <button type="submit" disabled={busy}>
          Save settings
        </button>
      </div>
    </form>
  );
}
