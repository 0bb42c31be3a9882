import { z } from 'zod';
import { AppError } from '../../errors';
import type { RouteRegistry } from '../routing';
import { sendWebAsset, sendWebPage, webAppDir } from '../web-app';

const TAG = 'Service';

/** The dashboard (docs/dashboard.md), served from its build in `dir`. */
export function registerWebAppRoutes(api: RouteRegistry, dir = webAppDir()): void {
  api.add({
    method: 'get',
    path: '/app/assets/:file',
    tag: TAG,
    summary: "Static files of the dashboard's build (scripts, styles), named by their content and cacheable for a year",
    auth: 'none',
    params: z.object({ file: z.string().describe('File name') }),
    raw: true,
    handler: async ({ params, res }) => {
      if (!(await sendWebAsset(res, dir, params.file))) throw new AppError(404, 'NOT_FOUND', `No such file: ${params.file}`);
    },
  });

  for (const path of ['/app', '/app/*page']) {
    api.add({
      method: 'get',
      path,
      tag: TAG,
      summary: 'The dashboard (HTML): one page for every path under /app; 503 when it has not been built',
      auth: 'none',
      raw: true,
      handler: ({ res }) => sendWebPage(res, dir),
    });
  }
}
