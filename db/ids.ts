import { randomBytes } from 'node:crypto';

/**
 * Prefixed ids that sort by creation time (48-bit ms timestamp + 80 random bits, hex).
 * Keyset pagination orders by id, so rows inserted while a client pages never shift a page.
 */
export function newId(prefix: 'cnt' | 'prj' | 'evt' | 'job' | 'dom' | 'tpl'): string {
  const ts = Date.now().toString(16).padStart(12, '0');
  return `${prefix}_${ts}${randomBytes(10).toString('hex')}`;
}
