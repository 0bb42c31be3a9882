import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Response } from 'express';
import { htmlPage } from './html-page';

/**
 * Where `npm run build` leaves the dashboard (vite, web/vite.config.ts): dist/web under the package
 * root, whether this file runs from the sources (tests, tsx) or from dist/.
 */
export function webAppDir(): string {
  let dir = __dirname;
  while (!existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return path.join(dir, 'dist', 'web');
}

/** A hashed file of the build (its name changes with its content): cacheable for a year. False when there is none. */
export function sendWebAsset(res: Response, dir: string, file: string): Promise<boolean> {
  if (!/^[\w.-]+$/.test(file) || !existsSync(path.join(dir, 'assets', file))) return Promise.resolve(false);
  return new Promise((resolve, reject) => {
    res.sendFile(path.join(dir, 'assets', file), { maxAge: '365d', immutable: true }, (err) => {
      if (!err || res.headersSent) resolve(true);
      else reject(err);
    });
  });
}

/**
 * The app's one page, for every path under /app: the app routes in the browser, so a link into it
 * or a reload works. Without a build it says how to make one.
 */
export function sendWebPage(res: Response, dir: string): void {
  const index = path.join(dir, 'index.html');
  if (!existsSync(index)) {
    res
      .status(503)
      .type('html')
      .send(htmlPage('Dashboard not built', '<p>The dashboard is built by <code>npm run build</code> (which <code>npm ci</code> runs).</p>'));
    return;
  }
  res.set('Cache-Control', 'no-cache').sendFile(index);
}
