import { useQuery } from '@tanstack/react-query';
import { Tabs } from 'radix-ui';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api/client';
import { useServiceConfig } from '../../api/config';
import { useProject } from '../../app/project';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { EmptyState, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import './outbox.css';
import './settings.css';

/** GET /projects/:id/outbox items. */
interface OutboxSummary {
  id: string;
  emailId: string;
  from: string;
  to: string;
  subject: string;
  date: string;
  dkim: string | null;
}

/** GET /projects/:id/outbox/:messageId. */
interface OutboxMessage extends OutboxSummary {
  html: string | null;
  text: string | null;
  headers: Array<{ name: string; value: string }>;
  attachments: Array<{ filename: string; contentType: string; size: number }>;
}

/**
 * Outbox mode (no SMTP relay): the project's own mail, written instead of sent, newest first; a
 * message opens in place (?message=…) with its HTML, text and headers.
 */
export default function Outbox() {
  const { projectId } = useProject();
  const config = useServiceConfig();
  const [params] = useSearchParams();
  const messageId = params.get('message');
  if (config.error) {
    return (
      <>
        <PageHeader title="Outbox" />
        <ErrorNotice error={config.error} />
      </>
    );
  }
  if (!config.data) return <Loading />;
  if (config.data.features.smtp.enabled) {
    return (
      <>
        <PageHeader title="Outbox" />
        <EmptyState>This server sends mail through an SMTP relay, so it keeps no outbox. Follow your sends in Activity.</EmptyState>
      </>
    );
  }
  return messageId ? <Message projectId={projectId} messageId={messageId} /> : <MessageList projectId={projectId} />;
}

function MessageList({ projectId }: { projectId: string }) {
  const list = useCursorList<OutboxSummary>(['outbox', projectId], `/projects/${projectId}/outbox`, { limit: 20 });
  return (
    <>
      <PageHeader
        title="Outbox"
        description="No SMTP relay is configured, so this project's mail is written here instead of being sent. Newest first."
      />
      <ErrorNotice error={list.error} />
      {list.isPending ? <Loading /> : null}
      {list.data && list.data.data.length === 0 && !list.hasPrevious ? (
        <EmptyState>Nothing has been sent from this project yet.</EmptyState>
      ) : null}
      {list.data && list.data.data.length > 0 ? (
        <>
          <TableScroll label="Messages in the outbox">
            <table>
              <caption className="visually-hidden">Messages in the outbox, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Subject</th>
                  <th scope="col">To</th>
                  <th scope="col">From</th>
                  <th scope="col">Date</th>
                  <th scope="col">DKIM</th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((m) => (
                  <tr key={m.id}>
                    <td>
                      <Link to={`?message=${encodeURIComponent(m.id)}`}>{m.subject || '(no subject)'}</Link>
                    </td>
                    <td>{m.to}</td>
                    <td>{m.from}</td>
                    <td>{formatDate(m.date)}</td>
                    <td>{m.dkim ? <span className="badge badge-ok">Signed</span> : <span className="badge">Unsigned</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          <CursorPager list={list} label="Outbox" />
        </>
      ) : null}
    </>
  );
}

function Message({ projectId, messageId }: { projectId: string; messageId: string }) {
  const message = useQuery({
    queryKey: ['outbox-message', projectId, messageId],
    queryFn: () => api<OutboxMessage>(`/projects/${projectId}/outbox/${encodeURIComponent(messageId)}`),
  });
  const m = message.data;
  return (
    <>
      <p>
        <Link to=".">← Outbox</Link>
      </p>
      <PageHeader title={m ? m.subject || '(no subject)' : 'Message'} />
      <ErrorNotice error={message.error} />
      {message.isPending ? <Loading /> : null}
      {m ? (
        <>
          <dl className="facts">
            <dt>From</dt>
            <dd>{m.from}</dd>
            <dt>To</dt>
            <dd>{m.to}</dd>
            <dt>Date</dt>
            <dd>{formatDate(m.date)}</dd>
            <dt>DKIM</dt>
            <dd>{m.dkim ? `Signed (${m.dkim})` : 'Not signed'}</dd>
            <dt>Email</dt>
            <dd>
              <code>{m.emailId}</code>
            </dd>
          </dl>
          <Tabs.Root defaultValue={m.html ? 'html' : 'text'}>
            <Tabs.List className="tabs-list" aria-label="Parts of the message">
              <Tabs.Trigger value="html" disabled={!m.html}>
                HTML
              </Tabs.Trigger>
              <Tabs.Trigger value="text" disabled={!m.text}>
                Text
              </Tabs.Trigger>
              <Tabs.Trigger value="headers">Headers</Tabs.Trigger>
              <Tabs.Trigger value="attachments">Attachments ({m.attachments.length})</Tabs.Trigger>
            </Tabs.List>
            <Tabs.Content value="html">
              {/* An empty sandbox: the sender's markup renders as a mail client shows it, and nothing in it runs or reaches this origin. */}
              {m.html ? <iframe className="message-frame" sandbox="" srcDoc={m.html} title={`HTML of “${m.subject}”`} /> : null}
            </Tabs.Content>
            <Tabs.Content value="text">
              <pre className="message-text">{m.text}</pre>
            </Tabs.Content>
            <Tabs.Content value="headers">
              <TableScroll label="Headers of the message">
                <table className="headers-table">
                  <caption className="visually-hidden">Headers, in order</caption>
                  <tbody>
                    {m.headers.map((h, i) => (
                      <tr key={`${i}:${h.name}`}>
                        <th scope="row">{h.name}</th>
                        <td>{h.value}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableScroll>
            </Tabs.Content>
            <Tabs.Content value="attachments">
              {m.attachments.length ? (
                <ul>
                  {m.attachments.map((a, i) => (
                    <li key={`${i}:${a.filename}`}>
                      {a.filename} ({a.contentType}, {a.size.toLocaleString()} bytes)
                    </li>
                  ))}
                </ul>
              ) : (
                <p className="muted">No attachments.</p>
              )}
            </Tabs.Content>
          </Tabs.Root>
        </>
      ) : null}
    </>
  );
}
