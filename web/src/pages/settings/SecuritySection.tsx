import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client';
import { formatDate, formatPercent } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { ErrorNotice, Loading } from '../../components/ui';

interface Figures {
  sent: number;
  bounced: number;
  complained: number;
  bounceRate: number;
  complaintRate: number;
}

/** GET /projects/:id/security. */
interface Security {
  disabled: boolean;
  disabledReason: string | null;
  disabledAt: string | null;
  last7Days: Figures;
  allTime: Figures;
  evaluated: Figures & { since: string };
  rules: { windowDays: number; minEmails: number; maxBounceRate: number; maxComplaintRate: number };
  suspensions: Array<{ id: string; reason: string; createdAt: string; liftedAt: string | null }>;
}

/** Bounce and complaint limits are fractions of a percent: two decimals tell them apart. */
const percent = (rate: number) => formatPercent(rate, 2);

/** Bounce and complaint rates against the rule that disables a project, and past suspensions. */
export function SecuritySection({ projectId }: { projectId: string }) {
  const security = useQuery({ queryKey: ['security', projectId], queryFn: () => api<Security>(`/projects/${projectId}/security`) });
  const s = security.data;
  return (
    <section className="card" id="security" aria-labelledby="security-heading">
      <h2 id="security-heading">Sending reputation</h2>
      <ErrorNotice error={security.error} />
      {security.isPending ? <Loading /> : null}
      {s ? (
        <>
          {s.disabled ? (
            <div className="notice notice-error">
              <p>
                This project is disabled{s.disabledAt ? ` since ${formatDate(s.disabledAt)}` : ''}: {s.disabledReason ?? 'no reason recorded'}. It can read but
                not send; the operator re-enables it.
              </p>
            </div>
          ) : null}
          <div className="stat-row">
            <div className="stat">
              <span className="value">{s.last7Days.sent.toLocaleString()}</span> sent, last {s.rules.windowDays} days
            </div>
            <div className="stat">
              <span className="value">{percent(s.last7Days.bounceRate)}</span> bounced ({s.last7Days.bounced.toLocaleString()})
            </div>
            <div className="stat">
              <span className="value">{percent(s.last7Days.complaintRate)}</span> complained ({s.last7Days.complained.toLocaleString()})
            </div>
            <div className="stat">
              <span className="value">{s.allTime.sent.toLocaleString()}</span> sent in all
            </div>
          </div>
          <p className="muted">
            A project is disabled when, with at least {s.rules.minEmails.toLocaleString()} emails sent in the last {s.rules.windowDays} days, more than{' '}
            {percent(s.rules.maxBounceRate)} bounce or more than {percent(s.rules.maxComplaintRate)} are marked as spam. Counted now:{' '}
            {s.evaluated.sent.toLocaleString()} sent since {formatDate(s.evaluated.since)}, {percent(s.evaluated.bounceRate)} bounced,{' '}
            {percent(s.evaluated.complaintRate)} complained.
          </p>
          {s.suspensions.length ? (
            <TableScroll label="Suspensions">
              <table>
                <caption>Suspensions</caption>
                <thead>
                  <tr>
                    <th scope="col">Reason</th>
                    <th scope="col">Since</th>
                    <th scope="col">Lifted</th>
                  </tr>
                </thead>
                <tbody>
                  {s.suspensions.map((x) => (
                    <tr key={x.id}>
                      <td>{x.reason}</td>
                      <td>{formatDate(x.createdAt)}</td>
                      <td>{x.liftedAt ? formatDate(x.liftedAt) : 'Not yet'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableScroll>
          ) : null}
        </>
      ) : null}
    </section>
  );
}
