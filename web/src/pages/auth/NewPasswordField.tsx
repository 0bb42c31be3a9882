import type { InputHTMLAttributes } from 'react';
import { TextField } from '../../components/ui';

/** The service's password rule (api/schemas/auth.ts), said where a password is chosen: signing up and resetting. */
const MIN_LENGTH = 8;

export function NewPasswordField({ label, error, ...input }: { label: string; error?: string } & InputHTMLAttributes<HTMLInputElement>) {
  return (
    <TextField
      label={label}
      type="password"
      autoComplete="new-password"
      required
      minLength={MIN_LENGTH}
      hint={`At least ${MIN_LENGTH} characters.`}
      error={error}
      {...input}
    />
  );
}
