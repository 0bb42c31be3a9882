import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link } from 'react-router';
import { api } from '../../api/client';
import { useOutboxMode, useServiceConfig } from '../../api/config';
import { useProject } from '../../app/project';
import { ErrorNotice, Loading, PageHeader, ProgressBar } from '../../components/ui';
import './setup.css';

/** GET /projects/:id/setup-state. */
interface SetupState {
  hasVerifiedDomain: boolean;
  hasTemplate: boolean;
  hasContact: boolean;
  hasSentEmail: boolean;
  hasEnabledWorkflow: boolean;
  complete: boolean;
}

interface Step {
  done: boolean;
  title: string;
  body: ReactNode;
  to: string;
  action: string;
}

/** The onboarding checklist: what the project still lacks before it really sends, each with its page. */
export default function Setup() {
  const { projectId } = useProject();
  const config = useServiceConfig();
  const state = useQuery({
    queryKey: ['setup-state', projectId],
    queryFn: () => api<SetupState>(`/projects/${projectId}/setup-state`),
  });
  const outboxMode = useOutboxMode() === true;
  const apiUrl = config.data?.urls.api ?? window.location.origin;

  const steps = (s: SetupState): Step[] => [
    {
      done: s.hasVerifiedDomain,
      title: 'Verify a sending domain',
      body: outboxMode ? (
        <>
          Add the domain your mail comes from and publish its DNS records. This server runs in outbox mode, so a domain you
          add can send at once: its mail goes to the <Link to={`/p/${projectId}/outbox`}>outbox</Link>.
        </>
      ) : (
        'Add the domain your mail comes from and publish the DNS records it lists; the domain is checked until they are found.'
      ),
      to: 'domains',
      action: 'Go to Domains',
    },
    {
      done: s.hasTemplate,
      title: 'Create a template',
      body: 'Write a subject and body once, with variables such as {{firstName}}, and use it in sends, campaigns and journeys.',
      to: 'templates',
      action: 'Go to Templates',
    },
    {
      done: s.hasContact,
      title: 'Add contacts',
      body: 'Add people one by one, import a CSV file, or let your app create them as it sends and tracks events.',
      to: 'contacts',
      action: 'Go to Contacts',
    },
    {
      done: s.hasSentEmail,
      title: 'Send a first email',
      body: (
        <>
          Send a campaign, or call the API with your project's secret key (see <Link to={`/p/${projectId}/settings`}>Settings</Link>):
          <pre>
            <code>{`curl ${apiUrl}/v1/send \\
  -H "Authorization: Bearer $SECRET_KEY" \\
  -H "Content-Type: application/json" \\
  -d '{"to":"you@example.com","from":"hello@your-domain.com","subject":"Hello","body":"<p>Hi!</p>"}'`}</code>
          </pre>
        </>
      ),
      to: 'campaigns',
      action: 'Go to Campaigns',
    },
    {
      done: s.hasEnabledWorkflow,
      title: 'Enable a journey',
      body: 'Start a sequence of emails, waits and conditions when a contact signs up or does something in your app.',
      to: 'journeys',
      action: 'Go to Journeys',
    },
  ];

  return (
    <>
      <PageHeader title="Get started" description="Five steps to a project that sends. Each step links to the page where it is done." />
      <ErrorNotice error={state.error} />
      {state.isPending ? <Loading /> : null}
      {state.data ? <Checklist steps={steps(state.data)} complete={state.data.complete} projectId={projectId} /> : null}
      <section className="card setup-more" aria-labelledby="more-heading">
        <h2 id="more-heading">Also in Settings</h2>
        <p>
          Your project's API keys, its members and their roles, and monthly sending limits are in{' '}
          <Link to={`/p/${projectId}/settings`}>Settings</Link>.
        </p>
      </section>
    </>
  );
}

function Checklist({ steps, complete, projectId }: { steps: Step[]; complete: boolean; projectId: string }) {
  const done = steps.filter((s) => s.done).length;
  return (
    <>
      <ProgressBar value={done} max={steps.length} label={`${done} of ${steps.length} steps done`} />
      {complete ? (
        <p role="status" className="notice notice-ok">
          Every step is done: this project is set up.
        </p>
      ) : null}
      <ol className="checklist">
        {steps.map((step) => (
          <li key={step.to} className={step.done ? 'done' : undefined}>
            <span className={`badge ${step.done ? 'badge-ok' : ''}`}>{step.done ? 'Done' : 'To do'}</span>
            <div className="step-body">
              <h2>{step.title}</h2>
              <div className="step-text">{step.body}</div>
              <Link to={`/p/${projectId}/${step.to}`}>{step.action}</Link>
            </div>
          </li>
        ))}
      </ol>
    </>
  );
}
