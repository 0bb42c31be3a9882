import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client';
import { roleAtLeast, type Role } from '../../api/session';
import { useProject } from '../../app/project';
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { BillingSection } from './BillingSection';
import { MembersSection } from './MembersSection';
import { KeysSection, ProjectSection } from './ProjectSection';
import { SecuritySection } from './SecuritySection';
import './settings.css';

/** GET /users/@me/projects: one of the user's projects, with key previews. */
export interface UserProject {
  id: string;
  name: string;
  role: Role;
  secretKeyPreview: string;
  publicKeyPreview: string;
  disabled: boolean;
  disabledReason: string | null;
  disabledAt: string | null;
  createdAt: string;
}

export const myProjectsKey = ['my-projects'] as const;

/** The project's settings; what the user's role may not change is shown disabled, with why. */
export default function Settings() {
  const { projectId, role } = useProject();
  const projects = useQuery({ queryKey: myProjectsKey, queryFn: () => api<UserProject[]>('/users/@me/projects', { project: null }) });
  const project = projects.data?.find((p) => p.id === projectId);
  const admin = roleAtLeast(role, 'ADMIN');
  return (
    <>
      <PageHeader
        title="Settings"
        description={admin ? 'The project, its API keys, members, sending limits and reputation.' : 'You are a member: owners and admins change these settings.'}
      />
      <nav aria-label="Settings sections">
        <ul className="settings-toc">
          <li><a href="#project">Project</a></li>
          <li><a href="#keys">API keys</a></li>
          <li><a href="#members">Members</a></li>
          <li><a href="#billing">Usage and limits</a></li>
          <li><a href="#security">Reputation</a></li>
        </ul>
      </nav>
      <ErrorNotice error={projects.error} />
      {projects.isPending ? <Loading /> : null}
      {project ? (
        <>
          <ProjectSection key={`name-${project.id}`} project={project} admin={admin} />
          <KeysSection key={`keys-${project.id}`} project={project} admin={admin} />
        </>
      ) : null}
      <MembersSection key={`members-${projectId}`} projectId={projectId} role={role} />
      <BillingSection key={`billing-${projectId}`} projectId={projectId} admin={admin} />
      <SecuritySection projectId={projectId} />
    </>
  );
}
