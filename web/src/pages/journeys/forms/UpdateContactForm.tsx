import { useState } from 'react';
import { fieldError, SelectField, TextArea } from '../../../components/ui';
import { type FormProps, Frame } from './Frame';

/** UPDATE_CONTACT: data to merge (JSON, checked here first) and the subscription. */
export function UpdateContactForm(props: FormProps) {
  const c = props.step.config;
  const [updates, setUpdates] = useState(JSON.stringify(c.updates ?? {}, null, 2));
  const [subscribed, setSubscribed] = useState(c.subscribed === true ? 'true' : c.subscribed === false ? 'false' : '');
  return (
    <Frame
      {...props}
      build={() => {
        let parsed: unknown;
        try {
          parsed = updates.trim() ? JSON.parse(updates) : {};
        } catch (err) {
          return { error: `The data is not valid JSON: ${(err as Error).message}` };
        }
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return { error: 'The data is a JSON object, such as {"plan": "pro"}.' };
        const config: Record<string, unknown> = { updates: parsed };
        if (subscribed) config.subscribed = subscribed === 'true';
        return { config };
      }}
    >
      {(error) => (
        <>
          <TextArea
            label="Data to set"
            hint='A JSON object merged into the contact’s data, e.g. {"plan": "pro"}; null removes a key'
            value={updates}
            onChange={(e) => setUpdates(e.target.value)}
            error={fieldError(error, 'updates')}
            rows={4}
            spellCheck={false}
          />
          <SelectField label="Subscription" value={subscribed} onChange={(e) => setSubscribed(e.target.value)} error={fieldError(error, 'subscribed')}>
            <option value="">Leave as it is</option>
            <option value="true">Subscribe</option>
            <option value="false">Unsubscribe</option>
          </SelectField>
        </>
      )}
    </Frame>
  );
}
