import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Link } from 'react-router';
import { api, type CursorPage } from '../../api/client';
import { useProject } from '../../app/project';
import { CursorPager, useCursorList } from '../../components/CursorPager';
import { formatDate } from '../../components/format';
import { EmptyState, ErrorNotice, Loading, PageHeader, SelectField } from '../../components/ui';
import './analytics.css';

/** GET /activity items (api/schemas/feed.ts). */
interface FeedItem {
  id: string;
  type: string;
  name: string;
  contactId: string | null;
  email: string | null;
  data: Record<string, unknown>;
  createdAt: string;
}

interface Upcoming {
  campaigns: Array<{ id: string; name: string; scheduledFor: string }>;
  executions: Array<{
    id: string;
    workflowId: string;
    workflowName: string;
    contactId: string;
    email: string | null;
    waitingForEvent: string | null;
    waitingSince: string;
  }>;
}

const PAGE_SIZE = 25;
/** How often the live indicator asks whether anything happened. */
const POLL_MS = 4000;

const TYPE_LABEL: Record<string, string> = {
  'email.sent': 'Email sent',
  'email.delivered': 'Email delivered',
  'email.opened': 'Email opened',
  'email.clicked': 'Link clicked',
  'email.bounced': 'Email bounced',
  'email.complained': 'Marked as spam',
  'email.received': 'Email received',
  'contact.subscribed': 'Subscribed',
  'contact.unsubscribed': 'Unsubscribed',
  'event.tracked': 'Event tracked',
  'workflow.started': 'Journey started',
  'workflow.completed': 'Journey completed',
  'campaign.scheduled': 'Campaign scheduled',
  'campaign.sent': 'Campaign sent',
};

/** Groups offered in the filter when the project has activity of that kind. */
const GROUPS: Array<[prefix: string, label: string]> = [
  ['email.', 'All email activity'],
  ['contact.', 'All subscription changes'],
  ['segment.', 'All segment entries and exits'],
  ['workflow.', 'All journey activity'],
  ['campaign.', 'All campaign activity'],
];

function typeLabel(item: Pick<FeedItem, 'type' | 'name'>): string {
  if (item.type === 'event.tracked') return `Event “${item.name}”`;
  const segment = /^segment\.(.+)\.(entry|exit)$/.exec(item.type);
  if (segment) return `${segment[2] === 'entry' ? 'Entered' : 'Left'} segment “${segment[1]}”`;
  return TYPE_LABEL[item.type] ?? item.type;
}

const optionLabel = (type: string) => (type === 'event.tracked' ? 'Events tracked by your app' : typeLabel({ type, name: type }));

/** Newest first, as the feed orders: time, then id. */
const newestFirst = (a: FeedItem, b: FeedItem) => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1);

/**
 * The project's activity, newest first and paged, filtered by type. On the first page, new activity
 * comes in by itself: the recent count is polled, and when it moves the newest items are fetched
 * and put on top, and a polite live region says how many arrived.
 */
export default function Activity() {
  const { projectId } = useProject();
  const [type, setType] = useState('');
  const [live, setLive] = useState(true);
  const [fresh, setFresh] = useState<FeedItem[]>([]);
  const [announcement, setAnnouncement] = useState<{ text: string; n: number } | null>(null);
  const [liveError, setLiveError] = useState<unknown>(null);
  const types = useQuery({ queryKey: ['activity-types', projectId], queryFn: () => api<{ types: string[] }>('/activity/types') });
  const list = useCursorList<FeedItem>(['activity', projectId], '/activity', { limit: PAGE_SIZE, type: type || undefined });
  const upcoming = useQuery({
    queryKey: ['activity-upcoming', projectId],
    queryFn: () => api<Upcoming>('/activity/upcoming', { query: { limit: 10 } }),
    refetchInterval: 30_000,
  });

  const onFirstPage = !list.hasPrevious;
  const pageItems = list.data?.data ?? [];
  const shown = onFirstPage ? dedupe([...fresh, ...pageItems]).sort(newestFirst) : pageItems;
  const freshIds = new Set(fresh.map((f) => f.id));

  // The latest of what is shown, read by the poll without restarting it.
  const shownRef = useRef(shown);
  shownRef.current = shown;
  const polling = live && onFirstPage && list.data !== undefined;
  useEffect(() => {
    if (!polling) return;
    let previous: number | null = null;
    let stopped = false;
    const filter = type || undefined;
    const tick = async () => {
      try {
        const { count } = await api<{ count: number; since: string }>('/activity/recent-count', { query: { minutes: 5, type: filter } });
        // The count of a sliding window: any move means something came in (or aged out, which costs one look).
        if (previous !== null && count !== previous) {
          const newest = shownRef.current[0]?.createdAt;
          const page = await api<CursorPage<FeedItem>>('/activity', { query: { type: filter, from: newest, limit: 100 } });
          const known = new Set(shownRef.current.map((i) => i.id));
          const arrived = page.data.filter((i) => !known.has(i.id));
          if (!stopped && arrived.length) {
            setFresh((f) => dedupe([...arrived, ...f]));
            setAnnouncement((a) => ({ text: `${arrived.length} new`, n: (a?.n ?? 0) + 1 }));
          }
        }
        previous = count;
        setLiveError(null);
      } catch (err) {
        setLiveError(err);
      }
    };
    void tick();
    const timer = setInterval(() => void tick(), POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [polling, type]);

  const changeType = (value: string) => {
    setType(value);
    setFresh([]);
    setAnnouncement(null);
    list.reset();
  };

  const present = types.data?.types ?? [];
  const groups = GROUPS.filter(([prefix]) => present.filter((t) => t.startsWith(prefix)).length > 1);

  return (
    <>
      <PageHeader title="Activity" description="Sends, opens, clicks, bounces, replies, subscriptions, journeys and campaigns, as they happen." />
      <div className="activity-layout">
        <section aria-labelledby="feed-heading">
          <h2 id="feed-heading" className="visually-hidden">
            Feed
          </h2>
          <div className="activity-filters">
            <SelectField label="Show" value={type} onChange={(e) => changeType(e.target.value)}>
              <option value="">All activity</option>
              {groups.map(([prefix, label]) => (
                <option key={prefix} value={prefix}>
                  {label}
                </option>
              ))}
              {present.map((t) => (
                <option key={t} value={t}>
                  {optionLabel(t)}
                </option>
              ))}
            </SelectField>
            <label className="live-toggle">
              <input type="checkbox" checked={live} onChange={(e) => setLive(e.target.checked)} /> Live updates
            </label>
          </div>
          <p className="live-status muted" role="status" aria-live="polite">
            {announcement ? <span key={announcement.n}>{announcement.text}</span> : null}
          </p>
          <ErrorNotice error={list.error ?? types.error ?? liveError} />
          {list.isPending ? (
            <Loading label="Loading activity…" />
          ) : shown.length === 0 && onFirstPage ? (
            <EmptyState>{type ? 'No activity of this kind yet.' : 'Nothing has happened yet: activity shows up here as it comes.'}</EmptyState>
          ) : (
            <>
              <ul className="feed" aria-label="Activity, newest first">
                {shown.map((item) => (
                  <li key={item.id} className={freshIds.has(item.id) ? 'fresh' : undefined}>
                    <span className="feed-what">
                      <strong>{typeLabel(item)}</strong> <Subject projectId={projectId} item={item} />
                      {freshIds.has(item.id) ? <span className="visually-hidden"> (new)</span> : null}
                    </span>
                    <time className="feed-when" dateTime={item.createdAt}>
                      {formatDate(item.createdAt)}
                    </time>
                    <Detail item={item} />
                  </li>
                ))}
              </ul>
              <CursorPager list={list} label="Activity" />
            </>
          )}
        </section>
        <UpcomingPanel projectId={projectId} upcoming={upcoming.data} error={upcoming.error} pending={upcoming.isPending} />
      </div>
    </>
  );
}

function dedupe(items: FeedItem[]): FeedItem[] {
  const seen = new Set<string>();
  return items.filter((i) => (seen.has(i.id) ? false : (seen.add(i.id), true)));
}

const text = (v: unknown) => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null);

/** Who or what the activity is about, linked to its page. */
function Subject({ projectId, item }: { projectId: string; item: FeedItem }) {
  const campaignId = text(item.data.campaignId);
  const workflowId = text(item.data.workflowId);
  if (item.type.startsWith('campaign.') && campaignId) {
    return <Link to={`/p/${projectId}/campaigns/${campaignId}`}>{text(item.data.campaignName) ?? campaignId}</Link>;
  }
  if (item.type.startsWith('workflow.') && workflowId) {
    return (
      <>
        <Link to={`/p/${projectId}/journeys/${workflowId}`}>{text(item.data.workflowName) ?? workflowId}</Link>
        {item.contactId ? (
          <>
            {' for '}
            <Link to={`/p/${projectId}/contacts/${item.contactId}`}>{item.email ?? 'a contact'}</Link>
          </>
        ) : null}
      </>
    );
  }
  if (item.contactId) return <Link to={`/p/${projectId}/contacts/${item.contactId}`}>{item.email ?? 'a contact'}</Link>;
  return null;
}

function Detail({ item }: { item: FeedItem }) {
  if (item.type === 'campaign.sent' || item.type === 'campaign.scheduled') {
    const total = item.data.totalRecipients;
    const when = text(item.data.scheduledFor);
    return (
      <span className="feed-detail">
        {typeof total === 'number' ? `${total.toLocaleString()} recipients` : null}
        {item.type === 'campaign.scheduled' && when ? ` · for ${formatDate(when)}` : null}
      </span>
    );
  }
  if (item.type === 'event.tracked' || item.type === 'email.received') {
    const entries = Object.entries(item.data);
    if (!entries.length) return null;
    const summary = entries
      .slice(0, 4)
      .map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
      .join(' · ');
    return <span className="feed-detail">{summary.length > 200 ? `${summary.slice(0, 200)}…` : summary}</span>;
  }
  return null;
}

function UpcomingPanel({ projectId, upcoming, error, pending }: { projectId: string; upcoming?: Upcoming; error: unknown; pending: boolean }) {
  return (
    <section className="card upcoming-card" aria-labelledby="upcoming-heading">
      <h2 id="upcoming-heading">Coming up</h2>
      <ErrorNotice error={error} />
      {pending ? <Loading /> : null}
      {upcoming ? (
        <>
          <h3>Scheduled campaigns</h3>
          {upcoming.campaigns.length === 0 ? (
            <p className="muted">None scheduled.</p>
          ) : (
            <ul className="upcoming">
              {upcoming.campaigns.map((c) => (
                <li key={c.id}>
                  <Link to={`/p/${projectId}/campaigns/${c.id}`}>{c.name}</Link>
                  <br />
                  <span className="muted">
                    Sends <time dateTime={c.scheduledFor}>{formatDate(c.scheduledFor)}</time>
                  </span>
                </li>
              ))}
            </ul>
          )}
          <h3>Journeys waiting</h3>
          {upcoming.executions.length === 0 ? (
            <p className="muted">No contact is waiting in a journey.</p>
          ) : (
            <ul className="upcoming">
              {upcoming.executions.map((x) => (
                <li key={x.id}>
                  <Link to={`/p/${projectId}/contacts/${x.contactId}`}>{x.email ?? 'A contact'}</Link> in{' '}
                  <Link to={`/p/${projectId}/journeys/${x.workflowId}`}>{x.workflowName}</Link>
                  <br />
                  <span className="muted">
                    {x.waitingForEvent ? (
                      <>
                        Waiting for <code>{x.waitingForEvent}</code>
                      </>
                    ) : (
                      'In a delay'
                    )}{' '}
                    since <time dateTime={x.waitingSince}>{formatDate(x.waitingSince)}</time>
                  </span>
                </li>
              ))}
            </ul>
          )}
        </>
      ) : null}
    </section>
  );
}
