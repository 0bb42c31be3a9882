import http from 'node:http';
import { createTopology } from './topology';

/**
 * The real service with its two roles in separate processes (`tidings start --api` and
 * `tidings start --worker`, from source), on the test run's PostgreSQL and Temporal server and a
 * test env's task queue, delivering to an SMTP sink and resolving through a test DNS server: for
 * tests that SIGKILL one role and start it again. The API keeps its port across restarts, so a
 * client retrying the same URL reaches the new process. It is test/helpers/topology.ts with one
 * process of each role.
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

/**
 * The split API's rate limit: clients here retry hard on purpose, and the limiter is not under test.
 * A test's own API that serves the same project must use it too: API processes share the project's
 * window and take places in it in blocks sized by their own limit (api/middleware/rate-limit.ts).
 */
export const SPLIT_RATE_LIMIT = '1000000';

export async function splitService(
  taskQueue: string,
  servers: { smtpUrl: string; dnsAddress: string },
  extra: Record<string, string> = {},
): Promise<SplitService> {
  const t = await createTopology({
    apis: 1,
    workers: 1,
    taskQueue,
    databaseUrl: process.env.TEST_DATABASE_URL!,
    temporalAddress: process.env.TEST_TEMPORAL_ADDRESS!,
    ...servers,
    env: { RATE_LIMIT_PER_MINUTE: SPLIT_RATE_LIMIT, ...extra },
  });
  const [api, worker] = [t.apis[0]!, t.workers[0]!];
  return {
    url: api.url,
    startApi: api.start,
    startWorker: worker.start,
    killApi: api.kill,
    killWorker: worker.kill,
    output: t.output,
    close: t.close,
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
