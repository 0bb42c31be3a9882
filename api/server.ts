import type { Server } from 'node:http';
import type { Express } from 'express';

/**
 * How long an idle keep-alive connection stays open. With Node's default (5 s) the server closes
 * connections that a client or a proxy is about to reuse, and the request written into one just
 * closed fails with ECONNRESET (a 502 behind a proxy): a bench's clients hit it after 5 s without
 * requests. Proxies keep theirs up to 60 s (nginx's upstream keepalive_timeout, AWS ALB's idle
 * timeout), so the server keeps its own open longer and leaves the closing to them.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** The API listening on `port` (and `host`) with the keep-alive timeout above; rejects on a listen error (EADDRINUSE). */
export function listenApp(app: Express, port: number, host?: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    // Express 5 hands a listen error to this callback rather than throwing it.
    const listening = (err?: Error) => (err ? reject(err) : resolve(server));
    const server = host === undefined ? app.listen(port, listening) : app.listen(port, host, listening);
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  });
}
