import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { webAppDir } from '../../api/web-app';
import { type TestUser } from './accounts';
import { startTestEnv, type TestEnv } from './env';

/** CI installs Debian's chromium; a machine without it must fail here, not skip the browser checks. */
export function chromiumPath(): string {
  const executable = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(executable)) {
    throw new Error(`Chromium not found at ${executable}: install it (apt-get install chromium) or point CHROMIUM_PATH at it`);
  }
  return executable;
}

export interface Dashboard {
  env: TestEnv;
  /** http://127.0.0.1:<port>, the API serving the app at /app. */
  origin: string;
  browser: Browser;
  /** A new signed-out browser context with every non-local request refused. */
  context(width?: number): Promise<BrowserContext>;
  /** A page signed in as the user (their session cookie set on the origin). */
  signedIn(user: Pick<TestUser, 'cookie'>, width?: number): Promise<Page>;
  close(): Promise<void>;
}

export const LAPTOP = 1280;
export const PHONE = 390;

/**
 * The real API (with a worker) on a loopback port serving the built dashboard, and Chromium driving it.
 * The app must have been built (`npm run build`, which `npm ci` runs).
 */
export async function startDashboard(envVars: Record<string, string> = {}): Promise<Dashboard> {
  if (!existsSync(path.join(webAppDir(), 'index.html'))) throw new Error('The dashboard is not built: run npm run build');
  const env = await startTestEnv(envVars);
  await env.startWorker();
  const server = http.createServer(env.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const browser = await chromium.launch({
    executablePath: chromiumPath(),
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const contexts: BrowserContext[] = [];
  const context = async (width = LAPTOP) => {
    const ctx = await browser.newContext({ viewport: { width, height: width === PHONE ? 844 : 800 }, baseURL: origin });
    // The app must work offline: anything not served by the service itself is refused.
    await ctx.route('**/*', (route) => {
      const host = new URL(route.request().url()).hostname;
      return host === '127.0.0.1' || host === 'localhost' ? route.continue() : route.abort('blockedbyclient');
    });
    contexts.push(ctx);
    return ctx;
  };
  return {
    env,
    origin,
    browser,
    context,
    async signedIn(user, width) {
      const ctx = await context(width);
      const [name, value] = user.cookie.split('=', 2) as [string, string];
      await ctx.addCookies([{ name, value, url: origin }]);
      return ctx.newPage();
    },
    async close() {
      await Promise.all(contexts.map((c) => c.close().catch(() => undefined)));
      await browser.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await env.close();
    },
  };
}

/**
 * What reaches past the right edge of the window, when the page scrolls sideways ([] when it fits:
 * wide tables scroll inside their own frame). Named, so a failure says which element is too wide.
 */
export function overflowing(page: Page): Promise<string[]> {
  // A script, not a function: this file is compiled without the DOM types.
  return page.evaluate(`(() => {
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= width) return [];
    return [...document.querySelectorAll('main *')]
      .filter((el) => el.getBoundingClientRect().right > width + 1 && !el.parentElement?.closest('.visually-hidden'))
      .slice(0, 8)
      .map((el) => el.tagName.toLowerCase() + '.' + el.className + ' (' + Math.round(el.getBoundingClientRect().right) + ' px)');
  })()`);
}

const axeSource = () => readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown[]; html: string }>;
}

/** axe-core's serious and critical violations on the page as it stands (expect it to equal []). */
export async function seriousViolations(page: Page): Promise<Array<{ id: string; help: string; targets: string[] }>> {
  await page.addScriptTag({ content: axeSource() });
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (ctx: unknown, opts: unknown) => Promise<{ violations: AxeViolation[] }> } }).axe;
    const result = await axe.run((globalThis as unknown as { document: unknown }).document, { resultTypes: ['violations'] });
    return result.violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, help: v.help, targets: v.nodes.map((n) => JSON.stringify(n.target)) }));
}

/**
 * Saves a full-page screenshot as docs/dashboard/<name>-<width>.png when SCREENSHOT_DIR is set
 * (`npm run screenshots`); the tests take the same steps either way.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.SCREENSHOT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  const width = page.viewportSize()?.width ?? LAPTOP;
  await page.screenshot({ path: path.join(dir, `${name}-${width}.png`), fullPage: true });
}
