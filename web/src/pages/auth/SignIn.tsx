import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, Navigate, useNavigate } from 'react-router';
import { api } from '../../api/client';
import { useMe } from '../../api/session';
import { ErrorNotice, fieldError, TextField } from '../../components/ui';
import { AuthFrame, OAuthButtons, sessionChanged } from './AuthFrame';

export default function SignIn() {
  const navigate = useNavigate();
  const client = useQueryClient();
  const me = useMe();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useMutation({
    mutationFn: () => api('/auth/login', { method: 'POST', body: { email, password }, project: null }),
    onSuccess: async () => {
      await sessionChanged(client);
      navigate('/');
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate();
  };
  // Someone already signed in (a bookmark, the back button) goes on to their project.
  if (me.data && !signIn.isPending) return <Navigate to="/" replace />;
  return (
    <AuthFrame title="Sign in">
      <form onSubmit={submit} noValidate>
        <TextField label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} error={fieldError(signIn.error, 'email')} />
        <TextField label="Password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} error={fieldError(signIn.error, 'password')} />
        <ErrorNotice error={signIn.error} />
        <button type="submit" className="button-primary" disabled={signIn.isPending}>
          {signIn.isPending ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <OAuthButtons />
      <p>
        New here? <Link to="/signup">Create an account</Link> · <Link to="/reset">Forgot your password?</Link>
      </p>
    </AuthFrame>
  );
}
