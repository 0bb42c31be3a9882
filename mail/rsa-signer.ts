import type { KeyObject } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * RSA-SHA256 signatures (DKIM's) on threads of their own, each signing what it is sent one after
 * another. Through libuv's pool (`crypto.sign` with a callback) the four pool threads signed at
 * once on a 2-core machine and took the cores from the event loop and PostgreSQL; one signing
 * thread on 2 cores sent 11–24 % more campaign emails a second (bench/campaign.ts). A queue
 * ahead of the pool (one signature in flight) did worse: the thread then waited on the event loop
 * between signatures. The pool stays free for what else uses it (DNS lookups, files, scrypt).
 */

/** One thread fewer than the cores, so that the event loop keeps one; libuv's pool size at most. */
const THREADS = Math.max(1, Math.min(4, availableParallelism() - 1));

// Plain JavaScript: it runs as it is in the service and under the tests' transform alike.
const SIGNER_SOURCE = `
const { sign } = require('node:crypto');
const { parentPort } = require('node:worker_threads');
// As many as mail/dkim.ts keeps parsed: one per domain key.
const keys = new Map();
parentPort.on('message', ({ id, keyId, key, data }) => {
  if (key) keys.set(keyId, key);
  try {
    parentPort.postMessage({ id, signature: sign('sha256', data, keys.get(keyId)) });
  } catch (err) {
    parentPort.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
`;

interface Pending {
  resolve: (signature: Buffer) => void;
  reject: (err: Error) => void;
}

class SignerThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  /** The keys this thread holds, by the number it knows each by: each crosses to it once. */
  private keyIds = new WeakMap<KeyObject, number>();
  private nextId = 0;

  sign(data: Buffer, key: KeyObject): Promise<Buffer> {
    const worker = this.started();
    const id = this.nextId++;
    let keyId = this.keyIds.get(key);
    const first = keyId === undefined;
    if (keyId === undefined) this.keyIds.set(key, (keyId = id));
    // Referenced while a signature is awaited, so that the process waits for it; idle, it does not keep the process alive.
    if (this.pending.size === 0) worker.ref();
    return new Promise<Buffer>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, keyId, key: first ? key : undefined, data });
    });
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(SIGNER_SOURCE, { eval: true });
    worker.on('message', (m: { id: number; signature?: Uint8Array; error?: string }) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (this.pending.size === 0) worker.unref();
      if (!p) return;
      if (m.signature) p.resolve(Buffer.from(m.signature.buffer, m.signature.byteOffset, m.signature.byteLength));
      else p.reject(new Error(m.error ?? 'DKIM signing failed'));
    });
    // A thread that died takes its pending signatures and its keys with it; the next signature starts another.
    const lost = (err: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.keyIds = new WeakMap();
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`DKIM signing thread exited (${code})`)));
    this.worker = worker;
    return worker;
  }
}

const threads = Array.from({ length: THREADS }, () => new SignerThread());
let turn = 0;

/** The RSA-SHA256 signature of `data` with `key`, made on a signing thread. */
export function rsaSha256(data: Buffer, key: KeyObject): Promise<Buffer> {
  const thread = threads[turn]!;
  turn = (turn + 1) % threads.length;
  return thread.sign(data, key);
}
