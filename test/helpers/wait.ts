/**
 * Waiting for a condition instead of for a stretch of time: the one polling loop the tests and
 * their helpers share. A test that waits for something to happen says what it waits for.
 *
 *   const row = await waitUntil(async () => (await status(id)) === 'SENT' && id);
 *   await waitUntil(() => ready(), { timeoutMs: 2_000, intervalMs: 20, what: 'the second MAIL FROM' });
 */

export interface WaitOptions {
  /** Give up (throw) after this long; default 20 s. */
  timeoutMs?: number;
  /** Between two looks; default 100 ms. */
  intervalMs?: number;
  /** What is awaited, for the error when it does not come (a function: what it says then). */
  what?: string | (() => string);
}

/**
 * Calls `fn` until it returns something truthy, and returns that; an error `fn` throws ends the
 * wait at once. Throws after the timeout (a number is the timeout in ms).
 */
export async function waitUntil<T>(fn: () => T | undefined | false | null | Promise<T | undefined | false | null>, options: number | WaitOptions = {}): Promise<T> {
  const { timeoutMs = 20_000, intervalMs = 100, what = 'condition' } = typeof options === 'number' ? { timeoutMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${typeof what === 'function' ? what() : what} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
