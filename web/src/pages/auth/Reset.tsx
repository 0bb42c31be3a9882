import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api/client';
import { ErrorNotice, fieldError, TextField } from '../../components/ui';
import { AuthFrame, sessionChanged } from './AuthFrame';
import { NewPasswordField } from './NewPasswordField';

interface Accepted {
  success: true;
  message: string;
}

/** /reset asks for a link; /reset?token=…, the link of the reset email, sets the new password. */
export default function Reset() {
  const [params] = useSearchParams();
  const token = params.get('token');
  return token ? <ChoosePassword token={token} /> : <RequestLink />;
}

function RequestLink() {
  const [email, setEmail] = useState('');
  const request = useMutation({
    mutationFn: () => api<Accepted>('/auth/request-password-reset', { method: 'POST', body: { email }, project: null }),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    request.mutate();
  };
  return (
    <AuthFrame title="Reset your password">
      {request.isSuccess ? (
        <p role="status" className="notice notice-ok">
          {request.data.message}.
        </p>
      ) : (
        <form onSubmit={submit} noValidate>
          <p>We will email you a link to choose a new password.</p>
          <TextField label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} error={fieldError(request.error, 'email')} />
          <ErrorNotice error={request.error} />
          <button type="submit" className="button-primary" disabled={request.isPending}>
            {request.isPending ? 'Sending…' : 'Email me a link'}
          </button>
        </form>
      )}
      <p>
        <Link to="/signin">Back to sign in</Link>
      </p>
    </AuthFrame>
  );
}

function ChoosePassword({ token }: { token: string }) {
  const client = useQueryClient();
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [mismatch, setMismatch] = useState(false);
  const reset = useMutation({
    mutationFn: () => api<Accepted>('/auth/reset-password', { method: 'POST', body: { token, password }, project: null }),
    // Every session of the account ends with the reset, this browser's too.
    onSuccess: () => sessionChanged(client),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setMismatch(password !== repeat);
    if (password === repeat) reset.mutate();
  };
  if (reset.isSuccess) {
    return (
      <AuthFrame title="Password changed">
        <p role="status" className="notice notice-ok">
          Your password is changed, and every session of your account has ended.
        </p>
        <p>
          <Link className="button button-primary" to="/signin">
            Sign in
          </Link>
        </p>
      </AuthFrame>
    );
  }
  return (
    <AuthFrame title="Choose a new password">
      <form onSubmit={submit} noValidate>
        <NewPasswordField label="New password" value={password} onChange={(e) => setPassword(e.target.value)} error={fieldError(reset.error, 'password')} />
        <TextField
          label="Repeat the new password"
          type="password"
          autoComplete="new-password"
          required
          value={repeat}
          onChange={(e) => setRepeat(e.target.value)}
          error={mismatch ? 'The two passwords differ.' : undefined}
        />
        <ErrorNotice error={reset.error} />
        <button type="submit" className="button-primary" disabled={reset.isPending}>
          {reset.isPending ? 'Saving…' : 'Set the new password'}
        </button>
      </form>
      <p>
        <Link to="/reset">Ask for a new link</Link> · <Link to="/signin">Sign in</Link>
      </p>
    </AuthFrame>
  );
}
