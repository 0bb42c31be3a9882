import type { RequestHandler } from 'express';
import type { Foreground } from '../../foreground';

/** Counts every request as the API's foreground work until its response is sent or its connection closes. */
export function countForeground(foreground: Foreground): RequestHandler {
  return (_req, res, next) => {
    const end = foreground.begin();
    res.on('finish', end);
    res.on('close', end);
    next();
  };
}
