import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {
  freePorts,
  killService,
  type Service,
  startService,
  stopService,
  waitForHealthy,
  waitForStderr,
} from './service-process';

/**
 * The real service with its two roles in separate processes (`tidings start --api` and
 * `tidings start --worker`, from source), on the test run's PostgreSQL and Temporal server and a
 * test env's task queue, delivering to an SMTP sink and resolving through a test DNS server: for
 * tests that SIGKILL one role and start it again. The API keeps its port across restarts, so a
 * client retrying the same URL reaches the new process.
 *
 *   const svc = await splitService(env.taskQueue, { smtpUrl: smtp.url, dnsAddress: dns.address });
 *   await Promise.all([svc.startWorker(), svc.startApi()]);
 *   await postJson(svc.url('/v1/send'), body, { headers, onResponse: (status) => status === 200 && svc.killApi() });
 *   await svc.close();
 */
export interface SplitService {
  url(p: string): string;
  /** Starts the API and resolves once /health answers ok. */
  startApi(): Promise<void>;
  /** Starts the worker (it bundles the workflows) and resolves once it polls the task queue. */
  startWorker(): Promise<void>;
  /** SIGKILL; the signal is sent before this returns its promise, so a caller need not await it. */
  killApi(): Promise<void>;
  killWorker(): Promise<void>;
  /** Everything each role printed so far, for failure messages. */
  output(): string;
  /** Stops whatever still runs (SIGTERM, SIGKILL if it hangs) and removes the data dir. */
  close(): Promise<void>;
}

const WORKER_READY = 'Worker polling task queue';

export async function splitService(
  taskQueue: string,
  servers: { smtpUrl: string; dnsAddress: string },
  extra: Record<string, string> = {},
): Promise<SplitService> {
  const ports = await freePorts();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-split-'));
  const env = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    PUBLIC_URL: `http://127.0.0.1:${ports.api}`,
    DATABASE_URL: process.env.TEST_DATABASE_URL!,
    TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS!,
    TEMPORAL_TASK_QUEUE: taskQueue,
    SMTP_URL: servers.smtpUrl,
    DNS_SERVERS: servers.dnsAddress,
    DOMAIN_CHECK_INTERVAL_SECONDS: '1',
    SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
    // Clients here retry hard on purpose; the limiter is not under test.
    RATE_LIMIT_PER_MINUTE: '1000000',
    ...extra,
  };
  let api: Service | undefined;
  let worker: Service | undefined;
  const lives: Service[] = [];
  const start = (role: '--api' | '--worker') => {
    const s = startService(dataDir, ports, { roles: [role], env });
    lives.push(s);
    return s;
  };
  return {
    url: (p) => `http://127.0.0.1:${ports.api}${p}`,
    async startApi() {
      if (api && !api.hasExited()) throw new Error('the API is already running');
      api = start('--api');
      await waitForHealthy(api);
    },
    async startWorker() {
      if (worker && !worker.hasExited()) throw new Error('the worker is already running');
      worker = start('--worker');
      await waitForStderr(worker, WORKER_READY);
    },
    killApi: () => (api ? killService(api) : Promise.resolve()),
    killWorker: () => (worker ? killService(worker) : Promise.resolve()),
    output: () => lives.map((s, i) => `--- process ${i + 1} (pid ${s.child.pid}) ---\n${s.stderr()}`).join('\n'),
    async close() {
      await Promise.all(
        lives.map((s) => (s.hasExited() ? undefined : stopService(s, 20_000).catch(() => killService(s)))),
      );
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

/**
 * POSTs JSON on a connection of its own (a keep-alive socket to a killed process would be dead).
 * `onResponse` runs as soon as the status line and headers are in, before the body is read: the
 * place to SIGKILL the server "right after it answered".
 */
export function postJson(
  url: string,
  body: unknown,
  opts: { headers?: Record<string, string>; onResponse?: (status: number) => unknown; timeoutMs?: number } = {},
): Promise<Answer> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': String(payload.length), ...opts.headers },
        timeout: opts.timeoutMs ?? 30_000,
      },
      (res) => {
        opts.onResponse?.(res.statusCode!);
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: kept as text for the failure message
          }
          resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${opts.timeoutMs ?? 30_000} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}
