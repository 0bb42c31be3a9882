import { useState } from 'react';
import { fieldError, SelectField } from '../../../components/ui';
import { EventNameField } from '../EventNameField';
import { formatSeconds } from '../stepTypes';
import { DurationFields } from './DurationFields';
import { type FormProps, Frame, str, type Unit, UNITS } from './Frame';

const UNIT_SECONDS: Record<Unit, number> = { minutes: 60, hours: 3600, days: 86400 };

/** A timeout in seconds, edited as an amount of the largest unit that divides it. */
function splitSeconds(seconds: number | undefined): { amount: string; unit: Unit } {
  if (seconds === undefined) return { amount: '3', unit: 'days' };
  const unit = [...UNITS].reverse().find((u) => seconds % UNIT_SECONDS[u] === 0) ?? 'minutes';
  return { amount: String(seconds / UNIT_SECONDS[unit]), unit };
}

const OUTCOME_EVENTS = ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained'];

/** WAIT_FOR_EVENT: the event, which email an email.* outcome is about, and an optional timeout. */
export function WaitForEventForm(props: FormProps) {
  const c = props.step.config;
  const initial = splitSeconds(typeof c.timeout === 'number' ? c.timeout : undefined);
  const [eventName, setEventName] = useState(str(c.eventName));
  const [hasTimeout, setHasTimeout] = useState(typeof c.timeout === 'number');
  const [amount, setAmount] = useState(initial.amount);
  const [unit, setUnit] = useState<Unit>(initial.unit);
  const [emailStepId, setEmailStepId] = useState(str(c.emailStepId));
  const sends = props.journey.steps.filter((s) => s.type === 'SEND_EMAIL');
  const outcome = OUTCOME_EVENTS.includes(eventName.trim());
  return (
    <Frame
      {...props}
      build={() => {
        const config: Record<string, unknown> = { eventName: eventName.trim() };
        if (hasTimeout) {
          const n = Number(amount);
          if (!Number.isInteger(n) || n <= 0) return { error: 'The timeout is a whole number greater than 0.' };
          config.timeout = n * UNIT_SECONDS[unit];
        }
        if (outcome && emailStepId) config.emailStepId = emailStepId;
        return { config };
      }}
    >
      {(error) => (
        <>
          <EventNameField
            label="Event"
            hint="A name you track, or one the service records such as email.opened"
            value={eventName}
            onChange={(e) => setEventName(e.target.value)}
            required
            error={fieldError(error, 'eventName')}
          />
          {outcome ? (
            <SelectField label="About which email" value={emailStepId} onChange={(e) => setEmailStepId(e.target.value)} error={fieldError(error, 'emailStepId')}>
              <option value="">The last one this journey sent before this step</option>
              {sends.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.name || `Send email ${s.id}`}
                </option>
              ))}
            </SelectField>
          ) : null}
          <label className="checkbox">
            <input type="checkbox" checked={hasTimeout} onChange={(e) => setHasTimeout(e.target.checked)} /> Stop waiting after a while (the
            “timeout” branch)
          </label>
          {hasTimeout ? (
            <DurationFields
              label="Timeout"
              unitLabel="Timeout unit"
              amount={amount}
              unit={unit}
              onAmount={setAmount}
              onUnit={setUnit}
              amountError={fieldError(error, 'timeout')}
            />
          ) : (
            <p className="muted small">Without a timeout the step waits for ever{typeof c.timeout === 'number' ? ` (now: ${formatSeconds(c.timeout)})` : ''}.</p>
          )}
        </>
      )}
    </Frame>
  );
}
