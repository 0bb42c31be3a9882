import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { httpLogSerializers } from '../../logger';

declare module 'http' {
  interface IncomingMessage {
    /** The request id: the caller's X-Request-Id when it is a UUID, else a new one. */
    id: string;
    /** The logger bound to this request (its id, method, URL, headers). */
    log: Logger;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Request id, a logger per request and one "request completed" line per response, as pino-http
 * gave them. The request's child logger is made only when something logs through it: making it
 * serializes the request (headers, redaction), an eighth of the API's CPU under `/v1/track` load
 * at LOG_LEVEL=warn, where nothing is written.
 */
export function requestLog(logger: Logger): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    req.id = typeof incoming === 'string' && UUID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', req.id);
    let child: Logger | undefined;
    Object.defineProperty(req, 'log', {
      configurable: true,
      get: () => (child ??= logger.child({ req: httpLogSerializers.req(req) })),
    });
    if (logger.isLevelEnabled('info')) {
      const started = Date.now();
      const done = () => {
        res.removeListener('finish', done);
        res.removeListener('close', done);
        const line = { res: httpLogSerializers.res(res), responseTime: Date.now() - started };
        if (res.statusCode >= 500) req.log.info({ ...line, err: new Error(`failed with status code ${res.statusCode}`) }, 'request errored');
        else req.log.info(line, 'request completed');
      };
      res.on('finish', done);
      res.on('close', done);
    }
    next();
  };
}
