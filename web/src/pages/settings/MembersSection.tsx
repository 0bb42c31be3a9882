import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useNavigate } from 'react-router';
import { api } from '../../api/client';
import { meKey, type Role, roleAtLeast, useMe } from '../../api/session';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { ErrorNotice, fieldError, Loading, SelectField, TextField } from '../../components/ui';

/** GET /projects/:id/members. */
interface Member {
  userId: string;
  email: string;
  name: string | null;
  role: Role;
  joinedAt: string;
}

/**
 * Members and roles. OWNER and ADMIN add, re-role and remove; only the owner hands ownership over;
 * anyone but the owner may leave. A MEMBER sees the controls disabled, and any 403 the service
 * answers is shown as it says it.
 */
export function MembersSection({ projectId, role }: { projectId: string; role: Role }) {
  const me = useMe();
  const admin = roleAtLeast(role, 'ADMIN');
  const membersKey = ['members', projectId];
  const members = useQuery({ queryKey: membersKey, queryFn: () => api<Member[]>(`/projects/${projectId}/members`) });
  return (
    <section className="card" id="members" aria-labelledby="members-heading">
      <h2 id="members-heading">Members</h2>
      <p className="muted">
        Owners and admins manage members, keys and limits; members use everything else. A project has one owner, who can hand ownership to
        another member.
      </p>
      <ErrorNotice error={members.error} />
      {members.isPending ? <Loading /> : null}
      {members.data ? (
        <TableScroll label="Members of the project">
          <table>
            <caption className="visually-hidden">Members of the project</caption>
            <thead>
              <tr>
                <th scope="col">Member</th>
                <th scope="col">Role</th>
                <th scope="col">Joined</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.data.map((m) => (
                <MemberRow key={`${m.userId}:${m.role}`} member={m} projectId={projectId} myRole={role} self={m.userId === me.data?.id} />
              ))}
            </tbody>
          </table>
        </TableScroll>
      ) : null}
      {admin ? null : <p className="muted">Only owners and admins can add members or change their roles.</p>}
      <AddMember projectId={projectId} admin={admin} />
    </section>
  );
}

function MemberRow({ member, projectId, myRole, self }: { member: Member; projectId: string; myRole: Role; self: boolean }) {
  const client = useQueryClient();
  const navigate = useNavigate();
  const [role, setRole] = useState<Role>(member.role);
  const admin = roleAtLeast(myRole, 'ADMIN');
  const refresh = () => Promise.all([client.invalidateQueries({ queryKey: ['members', projectId] }), client.invalidateQueries({ queryKey: meKey })]);
  const change = useMutation({
    mutationFn: () => api<Member>(`/projects/${projectId}/members/${member.userId}`, { method: 'PATCH', body: { role } }),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: () => api(`/projects/${projectId}/members/${member.userId}`, { method: 'DELETE' }),
    onSuccess: async () => {
      if (self) navigate('/');
      await refresh();
    },
  });
  const who = member.name ? `${member.name} (${member.email})` : member.email;
  const isOwner = member.role === 'OWNER';
  // The owner's role changes only by handing ownership over; that option is the owner's alone.
  const canChange = admin && !isOwner;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    change.mutate();
  };
  return (
    <tr>
      <td>
        {member.name ? (
          <>
            {member.name}
            <br />
            <span className="muted">{member.email}</span>
          </>
        ) : (
          member.email
        )}
        {self ? <> <span className="badge">you</span></> : null}
      </td>
      <td>
        {isOwner ? (
          <span className="badge">Owner</span>
        ) : (
          <form className="role-form" onSubmit={submit}>
            <label className="visually-hidden" htmlFor={`role-${member.userId}`}>
              Role of {member.email}
            </label>
            <select id={`role-${member.userId}`} value={role} onChange={(e) => setRole(e.target.value as Role)} disabled={!canChange}>
              <option value="MEMBER">Member</option>
              <option value="ADMIN">Admin</option>
              {myRole === 'OWNER' ? <option value="OWNER">Owner (hand over ownership)</option> : null}
            </select>
            {role === 'OWNER' ? (
              <ConfirmDialog
                trigger={
                  <button type="button" className="button-small" disabled={!canChange || change.isPending}>
                    Hand over
                  </button>
                }
                title={`Make ${who} the owner?`}
                description="They become the project's owner and you become an admin. Only they can hand ownership back."
                confirmLabel="Hand over ownership"
                onConfirm={() => change.mutateAsync()}
              />
            ) : (
              <button type="submit" className="button-small" disabled={!canChange || role === member.role || change.isPending} aria-label={`Save the role of ${member.email}`}>
                Save
              </button>
            )}
          </form>
        )}
        <ErrorNotice error={change.error} />
      </td>
      <td>{formatDate(member.joinedAt)}</td>
      <td>
        {isOwner ? null : self ? (
          <ConfirmDialog
            trigger={
              <button type="button" className="button-small button-danger">
                Leave
              </button>
            }
            title="Leave this project?"
            description="You lose access to it at once; an owner or admin can add you again."
            confirmLabel="Leave the project"
            onConfirm={() => remove.mutateAsync()}
          />
        ) : (
          <ConfirmDialog
            trigger={
              <button type="button" className="button-small button-danger" disabled={!admin} aria-label={`Remove ${member.email}`}>
                Remove
              </button>
            }
            title={`Remove ${who}?`}
            description="They lose access to the project at once."
            confirmLabel="Remove"
            onConfirm={() => remove.mutateAsync()}
          />
        )}
      </td>
    </tr>
  );
}

function AddMember({ projectId, admin }: { projectId: string; admin: boolean }) {
  const client = useQueryClient();
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<'MEMBER' | 'ADMIN'>('MEMBER');
  const add = useMutation({
    mutationFn: () => api<Member>(`/projects/${projectId}/members`, { method: 'POST', body: { email, role } }),
    onSuccess: async () => {
      setEmail('');
      await client.invalidateQueries({ queryKey: ['members', projectId] });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate();
  };
  return (
    <form onSubmit={submit} noValidate aria-labelledby="add-member-heading">
      <h3 id="add-member-heading">Add a member</h3>
      <fieldset className="plain" disabled={!admin}>
        <div className="inline-form">
          <TextField
            label="Email of their account"
            type="email"
            autoComplete="off"
            required
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            error={fieldError(add.error, 'email')}
            hint="They need an account on this server first."
          />
          <SelectField label="Role" value={role} onChange={(e) => setRole(e.target.value as 'MEMBER' | 'ADMIN')}>
            <option value="MEMBER">Member</option>
            <option value="ADMIN">Admin</option>
          </SelectField>
          <button type="submit" className="button-primary" disabled={add.isPending}>
            {add.isPending ? 'Adding…' : 'Add member'}
          </button>
        </div>
      </fieldset>
      {add.isSuccess ? (
        <p role="status" className="notice notice-ok">
          {add.data.email} is now a {add.data.role.toLowerCase()}.
        </p>
      ) : null}
      <ErrorNotice error={add.error} />
    </form>
  );
}
