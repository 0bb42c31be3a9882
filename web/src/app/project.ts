import { useOutletContext } from 'react-router';
import type { ProjectContext } from './ProjectLayout';

/** The project the page is in and the signed-in user's role there. */
export function useProject(): ProjectContext {
  return useOutletContext<ProjectContext>();
}
