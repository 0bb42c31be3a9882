import { useState } from 'react';
import { Link } from 'react-router';
import { useProject } from '../../../app/project';
import { fieldError, SelectField, TextField } from '../../../components/ui';
import { type FormProps, Frame, str } from './Frame';

/** SEND_EMAIL: which template, to the contact or to another address. */
export function SendEmailForm(props: FormProps) {
  const { projectId } = useProject();
  const c = props.step.config;
  const recipient = (c.recipient ?? { type: 'CONTACT' }) as { type: string; customEmail?: string };
  const [templateId, setTemplateId] = useState(str(c.templateId));
  const [custom, setCustom] = useState(recipient.type === 'CUSTOM');
  const [customEmail, setCustomEmail] = useState(recipient.customEmail ?? '');
  const known = props.templates.some((t) => t.id === templateId);
  return (
    <Frame
      {...props}
      build={() => ({ config: { templateId, recipient: custom ? { type: 'CUSTOM', customEmail: customEmail.trim() } : { type: 'CONTACT' } } })}
    >
      {(error) => (
        <>
          <SelectField label="Template" value={templateId} onChange={(e) => setTemplateId(e.target.value)} error={fieldError(error, 'templateId')}>
            {!known ? <option value={templateId}>{templateId || 'Choose a template'}</option> : null}
            {props.templates.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name}
              </option>
            ))}
          </SelectField>
          <p className="muted small">
            <Link to={`/p/${projectId}/templates`}>Manage templates</Link>
          </p>
          <fieldset className="radio-group">
            <legend>Send to</legend>
            <label>
              <input type="radio" name="recipient" checked={!custom} onChange={() => setCustom(false)} /> The contact
            </label>
            <label>
              <input type="radio" name="recipient" checked={custom} onChange={() => setCustom(true)} /> Another address
            </label>
          </fieldset>
          {custom ? (
            <TextField
              label="Address"
              type="email"
              value={customEmail}
              onChange={(e) => setCustomEmail(e.target.value)}
              error={fieldError(error, 'customEmail')}
            />
          ) : null}
        </>
      )}
    </Frame>
  );
}
