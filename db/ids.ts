import { randomBytes } from 'node:crypto';

let lastTime = 0;
let lastRandom = 0n;

/**
 * Prefixed ids that sort by creation time: 48-bit ms timestamp + 80 bits, in hex. Within one
 * millisecond (or if the clock steps back) a process counts up from its last value instead of
 * drawing anew, so ids it creates in order (an event and the one it caused) sort in that order.
 * Keyset pagination orders by id, so rows inserted while a client pages never shift a page.
 */
export function newId(prefix: 'cnt' | 'prj' | 'evt' | 'job' | 'dom' | 'tpl' | 'wfl' | 'stp' | 'trn' | 'exe' | 'seg' | 'cmp' | 'usr' | 'sus' | 'upl' | 'sml'): string {
  const now = Date.now();
  if (now > lastTime) {
    lastTime = now;
    // The top bit stays clear: 2^79 ids of headroom to count up within one millisecond.
    lastRandom = BigInt(`0x${randomBytes(10).toString('hex')}`) >> 1n;
  } else {
    lastRandom += 1n;
  }
  return `${prefix}_${lastTime.toString(16).padStart(12, '0')}${lastRandom.toString(16).padStart(20, '0')}`;
}
