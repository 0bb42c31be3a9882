import { Navigate } from 'react-router';
import { useMe } from '../api/session';
import { ErrorNotice, Loading } from '../components/ui';

/** /app: the first project of a signed-in user, the new-project page for one with none, or the sign-in page. */
export function Home() {
  const me = useMe();
  if (me.isPending) return <Loading />;
  if (me.error) {
    return (
      <main id="main" className="auth">
        <h1>Tidings</h1>
        <ErrorNotice error={me.error} />
      </main>
    );
  }
  if (!me.data) return <Navigate to="/signin" replace />;
  const first = me.data.memberships[0];
  return <Navigate to={first ? `/p/${first.projectId}/setup` : '/projects/new'} replace />;
}
