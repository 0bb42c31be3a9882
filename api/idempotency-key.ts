import type { Request } from 'express';
import { validationError } from '../errors';

/** The `Idempotency-Key` header: 1–255 printable ASCII characters, or absent. */
export function idempotencyKey(req: Request): string | undefined {
  const key = req.get('idempotency-key');
  if (key === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw validationError([
      { field: 'Idempotency-Key', message: 'Must be 1 to 255 printable ASCII characters without spaces', code: 'invalid_string' },
    ]);
  }
  return key;
}
