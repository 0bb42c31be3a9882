import { useEffect, useRef } from 'react';
import { Link, NavLink, Outlet, useLocation, useNavigate, useParams } from 'react-router';
import { setCurrentProject } from '../api/client';
import { useOutboxMode } from '../api/config';
import { type Me, type Role, useMe, useSignOut } from '../api/session';
import { VerifyNotice } from '../pages/auth/VerifyNotice';
import { Home } from './Home';
import './frame.css';

const NAV: Array<[path: string, label: string]> = [
  ['setup', 'Get started'],
  ['contacts', 'Contacts'],
  ['templates', 'Templates'],
  ['segments', 'Segments'],
  ['campaigns', 'Campaigns'],
  ['journeys', 'Journeys'],
  ['analytics', 'Analytics'],
  ['activity', 'Activity'],
  ['domains', 'Domains'],
  ['settings', 'Settings'],
];

/** The signed-in frame: navigation, the project switcher, and the current project for every call. */
export function ProjectLayout() {
  const me = useMe();
  const { projectId } = useParams();
  const membership = me.data?.memberships.find((m) => m.projectId === projectId);
  // Still loading, signed out, failed, or not a member of this project: /app's own answer (a wait, an error, or a redirect).
  if (!me.data || !membership) return <Home />;
  return <Frame me={me.data} projectId={membership.projectId} role={membership.role} />;
}

function Frame({ me, projectId, role }: { me: Me; projectId: string; role: Role }) {
  // Set while rendering, so the first query of a page in this project already carries it.
  setCurrentProject(projectId);
  const navigate = useNavigate();
  const signOut = useSignOut();
  // The outbox exists only when no SMTP relay is configured (GET /config).
  const outboxMode = useOutboxMode();
  useEffect(() => () => setCurrentProject(null), []);
  const navRef = useRef<HTMLElement>(null);
  const { pathname } = useLocation();
  // On a phone the sections scroll sideways: bring the current one into view (only the strip scrolls).
  useEffect(() => {
    const strip = navRef.current;
    const active = strip?.querySelector<HTMLElement>('a.active');
    if (!strip || !active || strip.scrollWidth <= strip.clientWidth) return;
    strip.scrollLeft = active.offsetLeft - (strip.clientWidth - active.offsetWidth) / 2;
  }, [pathname, outboxMode]);
  const nav: Array<[string, string]> = outboxMode ? [...NAV, ['outbox', 'Outbox']] : NAV;
  return (
    <div className="frame">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to={`/p/${projectId}/setup`} className="brand">
          Tidings
        </Link>
        <label className="project-switcher">
          <span className="visually-hidden">Project</span>
          <select
            value={projectId}
            onChange={(event) => {
              if (event.target.value === '__new') navigate('/projects/new');
              else navigate(`/p/${event.target.value}/setup`);
            }}
          >
            {me.memberships.map((m) => (
              <option key={m.projectId} value={m.projectId}>
                {m.projectName} ({m.role.toLowerCase()})
              </option>
            ))}
            <option value="__new">New project…</option>
          </select>
        </label>
        <span className="topbar-user muted">{me.email}</span>
        <button type="button" className="button-small" onClick={() => void signOut().then(() => navigate('/signin'))}>
          Sign out
        </button>
      </header>
      <nav aria-label="Sections" className="sidenav" ref={navRef}>
        <ul>
          {nav.map(([path, label]) => (
            <li key={path}>
              <NavLink to={`/p/${projectId}/${path}`}>{label}</NavLink>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" className="content" tabIndex={-1}>
        <VerifyNotice me={me} />
        <Outlet context={{ projectId, role } satisfies ProjectContext} />
      </main>
    </div>
  );
}

export interface ProjectContext {
  projectId: string;
  role: Role;
}
