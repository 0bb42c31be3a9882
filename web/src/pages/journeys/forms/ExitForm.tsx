import { useState } from 'react';
import { fieldError, TextField } from '../../../components/ui';
import { type FormProps, Frame, str } from './Frame';

/** EXIT: an optional reason, kept on the execution. */
export function ExitForm(props: FormProps) {
  const [reason, setReason] = useState(str(props.step.config.reason));
  return (
    <Frame {...props} build={() => ({ config: reason.trim() ? { reason: reason.trim() } : {} })}>
      {(error) => (
        <TextField label="Exit reason" hint="Optional; recorded on the execution" value={reason} maxLength={500} onChange={(e) => setReason(e.target.value)} error={fieldError(error, 'reason')} />
      )}
    </Frame>
  );
}
