import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { meKey } from '../../api/session';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { formatDate } from '../../components/format';
import { ErrorNotice, fieldError, TextField } from '../../components/ui';
import { KeysOnce } from './KeysOnce';
import { myProjectsKey, type UserProject } from './Settings';

/** The project's name (PATCH /users/@me/projects/:id, OWNER or ADMIN) and status. */
export function ProjectSection({ project, admin }: { project: UserProject; admin: boolean }) {
  const client = useQueryClient();
  const [name, setName] = useState(project.name);
  const rename = useMutation({
    mutationFn: () => api<UserProject>(`/users/@me/projects/${project.id}`, { method: 'PATCH', body: { name }, project: null }),
    onSuccess: async () => {
      await Promise.all([client.invalidateQueries({ queryKey: myProjectsKey }), client.invalidateQueries({ queryKey: meKey })]);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    rename.mutate();
  };
  return (
    <section className="card" id="project" aria-labelledby="project-heading">
      <h2 id="project-heading">Project</h2>
      <dl className="facts">
        <dt>Id</dt>
        <dd>
          <code>{project.id}</code>
        </dd>
        <dt>Created</dt>
        <dd>{formatDate(project.createdAt)}</dd>
        <dt>Status</dt>
        <dd>
          {project.disabled ? (
            <span className="badge badge-danger">Disabled{project.disabledReason ? `: ${project.disabledReason}` : ''}</span>
          ) : (
            <span className="badge badge-ok">Active</span>
          )}
        </dd>
      </dl>
      <form onSubmit={submit} noValidate>
        <fieldset className="plain" disabled={!admin}>
          <div className="inline-form two">
            <TextField
              label="Project name"
              required
              maxLength={100}
              value={name}
              onChange={(e) => setName(e.target.value)}
              error={fieldError(rename.error, 'name')}
              hint={admin ? undefined : 'Owners and admins can rename the project.'}
            />
            <button type="submit" disabled={rename.isPending || name === project.name}>
              {rename.isPending ? 'Saving…' : 'Rename'}
            </button>
          </div>
        </fieldset>
      </form>
      {rename.isSuccess && name === project.name ? (
        <p role="status" className="notice notice-ok">
          Renamed.
        </p>
      ) : null}
      <ErrorNotice error={rename.error} />
    </section>
  );
}

interface ProjectKeys {
  id: string;
  name: string;
  secretKey: string;
  publicKey: string;
}

/** Key previews, and rotation (OWNER or ADMIN) behind a confirmation; the new keys are shown once. */
export function KeysSection({ project, admin }: { project: UserProject; admin: boolean }) {
  const client = useQueryClient();
  const rotate = useMutation({
    mutationFn: () => api<ProjectKeys>(`/users/@me/projects/${project.id}/regenerate-keys`, { method: 'POST', project: null }),
    onSuccess: () => client.invalidateQueries({ queryKey: myProjectsKey }),
  });
  return (
    <section className="card" id="keys" aria-labelledby="keys-heading">
      <h2 id="keys-heading">API keys</h2>
      <p className="muted">The service keeps only a hash of each key; these are their first characters.</p>
      <dl className="facts">
        <dt>Secret key</dt>
        <dd>
          <code>{project.secretKeyPreview}</code>
        </dd>
        <dt>Public key</dt>
        <dd>
          <code>{project.publicKeyPreview}</code>
        </dd>
      </dl>
      {rotate.data ? <KeysOnce secretKey={rotate.data.secretKey} publicKey={rotate.data.publicKey} /> : null}
      <div className="actions">
        <ConfirmDialog
          trigger={
            <button type="button" className="button-danger" disabled={!admin}>
              Rotate keys
            </button>
          }
          title="Rotate both keys?"
          description={
            <>
              <p>New secret and public keys are made, and the current ones stop working within a second: every app and web page using them fails until you give it the new keys.</p>
              <p>The new keys are shown once, right after.</p>
            </>
          }
          confirmLabel="Rotate the keys"
          pendingLabel="Rotating…"
          onConfirm={() => rotate.mutateAsync()}
        />
        {admin ? null : <span className="muted">Owners and admins can rotate the keys.</span>}
      </div>
    </section>
  );
}
