import { lazy, Suspense, type ComponentType } from 'react';
import { createBrowserRouter, Navigate } from 'react-router';
import { Loading } from '../components/ui';
import { Home } from './Home';
import { ProjectLayout } from './ProjectLayout';
import SignIn from '../pages/auth/SignIn';

/** Every page but the first is its own chunk, fetched when it is opened. */
function page(load: () => Promise<{ default: ComponentType }>) {
  const Page = lazy(load);
  return (
    <Suspense fallback={<Loading />}>
      <Page />
    </Suspense>
  );
}

export const router = createBrowserRouter(
  [
    { path: '/', element: <Home /> },
    { path: '/signin', element: <SignIn /> },
    { path: '/signup', element: page(() => import('../pages/auth/SignUp')) },
    { path: '/verify', element: page(() => import('../pages/auth/Verify')) },
    { path: '/reset', element: page(() => import('../pages/auth/Reset')) },
    { path: '/projects/new', element: page(() => import('../pages/auth/NewProject')) },
    {
      path: '/p/:projectId',
      element: <ProjectLayout />,
      children: [
        { index: true, element: <Navigate to="setup" replace /> },
        { path: 'setup', element: page(() => import('../pages/setup/Setup')) },
        { path: 'contacts', element: page(() => import('../pages/contacts/Contacts')) },
        { path: 'contacts/import', element: page(() => import('../pages/contacts/Import')) },
        { path: 'contacts/:contactId', element: page(() => import('../pages/contacts/Contact')) },
        { path: 'templates', element: page(() => import('../pages/templates/Templates')) },
        { path: 'templates/:templateId', element: page(() => import('../pages/templates/Template')) },
        { path: 'domains', element: page(() => import('../pages/domains/Domains')) },
        { path: 'segments', element: page(() => import('../pages/segments/Segments')) },
        { path: 'segments/:segmentId', element: page(() => import('../pages/segments/Segment')) },
        { path: 'campaigns', element: page(() => import('../pages/campaigns/Campaigns')) },
        { path: 'campaigns/:campaignId', element: page(() => import('../pages/campaigns/Campaign')) },
        { path: 'journeys', element: page(() => import('../pages/journeys/Journeys')) },
        { path: 'journeys/:journeyId', element: page(() => import('../pages/journeys/Journey')) },
        { path: 'analytics', element: page(() => import('../pages/analytics/Analytics')) },
        { path: 'activity', element: page(() => import('../pages/analytics/Activity')) },
        { path: 'settings', element: page(() => import('../pages/settings/Settings')) },
        { path: 'outbox', element: page(() => import('../pages/settings/Outbox')) },
      ],
    },
    { path: '*', element: <Navigate to="/" replace /> },
  ],
  { basename: '/app' },
);
