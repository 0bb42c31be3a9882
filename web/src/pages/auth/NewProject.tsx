import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, Navigate, useNavigate } from 'react-router';
import { api } from '../../api/client';
import { meKey, type Role, useMe, useSignOut } from '../../api/session';
import { ErrorNotice, fieldError, Loading, TextField } from '../../components/ui';
import { KeysOnce } from '../settings/KeysOnce';
import { AuthFrame } from './AuthFrame';
import { VerifyNotice } from './VerifyNotice';

/** POST /users/@me/projects answers the project with its keys, shown this once. */
interface CreatedProject {
  id: string;
  name: string;
  role: Role;
  secretKey: string;
  publicKey: string;
}

export default function NewProject() {
  const me = useMe();
  const client = useQueryClient();
  const navigate = useNavigate();
  const signOut = useSignOut();
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () => api<CreatedProject>('/users/@me/projects', { method: 'POST', body: { name }, project: null }),
    // The project switcher and the project pages read the memberships.
    onSuccess: () => client.invalidateQueries({ queryKey: meKey }),
  });
  if (me.isPending) return <Loading />;
  if (me.error) {
    return (
      <AuthFrame title="Create a project">
        <ErrorNotice error={me.error} />
      </AuthFrame>
    );
  }
  if (!me.data) return <Navigate to="/signin" replace />;

  if (create.data) {
    const project = create.data;
    return (
      <AuthFrame title={`${project.name} is ready`}>
        <KeysOnce secretKey={project.secretKey} publicKey={project.publicKey} />
        <p>
          <Link className="button button-primary" to={`/p/${project.id}/setup`}>
            Continue to the setup checklist
          </Link>
        </p>
      </AuthFrame>
    );
  }

  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  const first = me.data.memberships[0];
  return (
    <AuthFrame title="Create a project">
      <VerifyNotice me={me.data} />
      <p>A project holds contacts, templates, campaigns and journeys, and has its own API keys and members.</p>
      <form onSubmit={submit} noValidate>
        <TextField label="Project name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} error={fieldError(create.error, 'name')} />
        <ErrorNotice error={create.error} />
        <div className="actions">
          <button type="submit" className="button-primary" disabled={create.isPending}>
            {create.isPending ? 'Creating…' : 'Create project'}
          </button>
          {first ? <Link to={`/p/${first.projectId}/setup`}>Cancel</Link> : null}
        </div>
      </form>
      <p className="muted">
        Signed in as {me.data.email}.{' '}
        <button type="button" className="button-small" onClick={() => void signOut().then(() => navigate('/signin'))}>
          Sign out
        </button>
      </p>
    </AuthFrame>
  );
}
