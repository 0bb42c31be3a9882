import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useNavigate } from 'react-router';
import { api } from '../../api/client';
import { useServiceConfig } from '../../api/config';
import { ErrorNotice, fieldError, TextField } from '../../components/ui';
import { AuthFrame, OAuthButtons, sessionChanged } from './AuthFrame';
import { NewPasswordField } from './NewPasswordField';

/** POST /auth/signup: the account is signed in at once and a verification link is mailed. */
export default function SignUp() {
  const navigate = useNavigate();
  const client = useQueryClient();
  const config = useServiceConfig();
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signUp = useMutation({
    mutationFn: () => api('/auth/signup', { method: 'POST', body: { email, password, ...(name.trim() ? { name: name.trim() } : {}) }, project: null }),
    onSuccess: async () => {
      await sessionChanged(client);
      navigate('/projects/new', { state: { signedUp: email } });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    signUp.mutate();
  };
  return (
    <AuthFrame title="Create your account">
      {config.data && !config.data.features.signups.enabled ? (
        <div className="notice">
          <p>Sign-ups are turned off on this server: ask its operator for an account.</p>
        </div>
      ) : null}
      <form onSubmit={submit} noValidate>
        <TextField label="Name (optional)" autoComplete="name" value={name} onChange={(e) => setName(e.target.value)} error={fieldError(signUp.error, 'name')} />
        <TextField label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} error={fieldError(signUp.error, 'email')} />
        <NewPasswordField label="Password" value={password} onChange={(e) => setPassword(e.target.value)} error={fieldError(signUp.error, 'password')} />
        <ErrorNotice error={signUp.error} />
        <button type="submit" className="button-primary" disabled={signUp.isPending}>
          {signUp.isPending ? 'Creating your account…' : 'Create account'}
        </button>
      </form>
      <OAuthButtons />
      <p>
        Have an account? <Link to="/signin">Sign in</Link>
      </p>
    </AuthFrame>
  );
}
